"""kill -9 an `anonymask anonymize` run at random points, many times, then let it finish.

Checks, after every kill: `verify` finds no damage and no temporary file is left in the store;
whenever the store is complete (a run finished before its kill, and at the end): every array of
every video is bit-identical to an uninterrupted run's; the store is then started afresh, so every
kill lands in real work, never in the quick skip of a finished store.

    .venv/bin/python scripts/kill_soak.py --kills 100 --out /tmp/soak        # ~40 min on 2 cores
    .venv/bin/python scripts/kill_soak.py --kills 3 --out /tmp/soak-smoke     # the slow test's size

By default the tiny synthetic set (3 videos) with ground-truth pose and masks, so a full run takes
tens of seconds and kills land in every stage; ``--real`` uses the default (MediaPipe) backends.
Writes ``<out>/kill_soak.json``. Exit 0 when every check held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

TEMP_SUFFIXES = (".tmp", ".part")


def _cmd(source: Path, store: Path, real: bool) -> list[str]:
    cmd = [sys.executable, "-m", "anonymask.cli", "anonymize", "--dataset", "demo", "--source", str(source),
           "--store", str(store)]
    return cmd if real else cmd + ["--set", "pose4d.backend=gt", "segment.backend=gt"]


def _env(out: Path) -> dict[str, str]:
    return dict(os.environ, PREFECT_HOME=str(out / "prefect"), ANONYMASK_LOG_DIR=str(out / "logs"),
                PYOPENGL_PLATFORM="egl")


def digests(store: Path) -> dict[str, str]:
    """sha256 of every array's bytes, per video and array path (attrs and timings excluded)."""
    import numpy as np
    import zarr

    from anonymask.storage.store import DatasetStore

    out: dict[str, str] = {}
    s = DatasetStore.open(str(store), mode="r")
    for vid in s.video_ids():
        def walk(g, prefix, vid=vid):
            for name, member in g.members():
                if isinstance(member, zarr.Array):
                    out[f"{vid}/{prefix}{name}"] = hashlib.sha256(np.ascontiguousarray(member[...]).tobytes()).hexdigest()
                else:
                    walk(member, f"{prefix}{name}/")
        walk(s.video(vid).group, "")
    return out


def _differ(ref: Path, store: Path) -> list[str]:
    a, b = digests(ref), digests(store)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def temp_files(store: Path) -> list[str]:
    return [str(p) for p in store.rglob("*") if p.name.endswith(TEMP_SUFFIXES)]


def verify(store: Path) -> list[str]:
    from anonymask.storage.inspect import verify_store
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import stage_deps

    if not (store / "zarr.json").exists():
        return []  # killed before the store existed
    res = verify_store(DatasetStore.open(str(store), mode="r"), deps=stage_deps())
    return res.damaged


def run_to_end(source: Path, store: Path, out: Path, real: bool) -> tuple[int, float]:
    t0 = time.perf_counter()
    p = subprocess.run(_cmd(source, store, real), env=_env(out), capture_output=True, text=True)
    return p.returncode, time.perf_counter() - t0


def soak(kills: int, out: Path, real: bool, seed: int) -> dict:
    from anonymask.models.shared.synthetic.generator import generate_demo

    out.mkdir(parents=True, exist_ok=True)
    source = out / "raw"
    if not (source / "dataset.json").exists():
        generate_demo(source, preset="tiny", seed=0)
    ref, soaked = out / "reference.zarr", out / "soaked.zarr"
    rc, full_s = run_to_end(source, ref, out, real) if not ref.exists() else (0, float("nan"))
    if rc != 0:
        raise SystemExit(f"the uninterrupted run failed (exit {rc})")
    if full_s != full_s:  # reference reused: time a fresh run's length from its records instead
        full_s = 60.0
    rng = random.Random(seed)
    report: dict = {"kills": [], "full_run_s": full_s, "real_backends": real, "seed": seed}
    for i in range(kills):
        at = rng.uniform(0.5, full_s)
        p = subprocess.Popen(_cmd(source, soaked, real), env=_env(out), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        t_start = time.perf_counter()
        try:
            p.wait(at)
            finished = True
            # a whole run took this long now (the machine's load changes): kills draw from it
            full_s = time.perf_counter() - t_start
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            finished = False
        time.sleep(0.3)  # the temporary server gets its SIGTERM from the kernel (PR_SET_PDEATHSIG)
        damage, temps = verify(soaked), temp_files(soaked) if soaked.exists() else []
        row = {"at_s": round(at, 2), "finished_first": finished, "damage": damage, "temp_files": temps}
        if finished:  # the store is complete: compare it, then start over so every kill lands in real work
            differ = _differ(ref, soaked)
            row["differ"] = differ
            report["completions"] = report.get("completions", 0) + 1
            shutil.rmtree(soaked)
        report["kills"].append(row)
        (out / "kill_soak.json").write_text(json.dumps(report, indent=2))
        print(f"[{i + 1}/{kills}] kill at {at:.1f}s: {'finished first' if finished else 'killed'}; "
              f"verify {'clean' if not damage else damage}; temp files {len(temps)}"
              + (f"; complete: {len(row['differ'])} arrays differ, store reset" if finished else ""), flush=True)
    rc, _ = run_to_end(source, soaked, out, real)
    differ = _differ(ref, soaked)
    report.update(final_exit=rc, arrays=len(digests(ref)), differ=differ, final_damage=verify(soaked),
                  final_temp_files=temp_files(soaked))
    report["ok"] = (rc == 0 and not differ and not report["final_damage"] and not report["final_temp_files"]
                    and all(not k["damage"] and not k["temp_files"] and not k.get("differ") for k in report["kills"]))
    (out / "kill_soak.json").write_text(json.dumps(report, indent=2))
    print(f"{kills} kills: {'OK' if report['ok'] else 'FAILED'}; {report['arrays']} arrays compared, {len(differ)} differ; "
          f"final verify {'clean' if not report['final_damage'] else report['final_damage']}", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--real", action="store_true", help="default (MediaPipe) backends instead of ground truth")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    return 0 if soak(args.kills, args.out, args.real, args.seed)["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
