"""kill -9 Dask workers mid-stage at random points, many times, while `anonymize` runs on Dask.

The anonymize flow runs with ``runner="dask"`` (what ``anonymask anonymize --runner dask`` does: a
LocalCluster of real worker processes, each under a nanny that starts a new worker after a kill) on
fresh stores, round after round, while a killer thread watches the videos' claims: when a worker
process holds one, it waits a random time and kill -9s that worker (as the OOM killer does), so
kills land where the time goes (mostly render here). A round ends when its run does; rounds go on
until ``--kills`` kills were made.

Checked for every round: every video is done, once (one summary row each, "done"; no stage that
had finished before a kill was computed again: its ``finished_at`` is unchanged at the end), no
temporary file is left, ``verify`` is clean, and every array is bit-identical to a local run's.

    .venv/bin/python scripts/dask_kill_soak.py --kills 20 --out /tmp/dask-soak     # ~8 min on 2 cores

Dask fails a task after ``distributed.scheduler.allowed-failures`` (default 3) worker deaths
while it runs; a soak that kills 20 times over 3 videos would hit that by design, so the soak
raises it (``--allowed-failures``, default: kills + 1). With the default, a video killed more
often fails with a KilledWorker line and a re-run resumes it (docs/SCALING.md).

By default the tiny synthetic set (3 videos) with ground-truth pose and masks. Writes
``<out>/dask_kill_soak.json``. Exit 0 when every check held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kill_soak import digests, temp_files, verify  # noqa: E402

GT = {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}


def run_flow(source: Path, store: Path, runner: str, log_dir: Path, workers: int | None = None) -> dict:
    from anonymask.flows.anonymize import anonymize

    state = anonymize(dataset="demo", source=str(source), store=str(store), overrides=GT, runner=runner,
                      workers=workers, log_dir=str(log_dir), return_state=True)
    summary = state.result(raise_on_failure=False)
    if not isinstance(summary, dict):
        summary = {"failed": -1, "rows": [], "message": str(state.message)}
    return summary


def finished_stages(store: Path, video_ids: list[str]) -> dict[str, str]:
    """``video/stage`` -> finished_at of every stage recorded done now."""
    from anonymask.storage.store import DatasetStore

    out: dict[str, str] = {}
    if not (store / "zarr.json").exists():
        return out
    try:
        s = DatasetStore.open(str(store), mode="r")
        for vid in video_ids:
            if not s.has_video(vid):
                continue
            for name, rec in s.video(vid).records().items():
                if isinstance(rec, dict) and rec.get("status") == "done":
                    out[f"{vid}/{name}"] = str(rec.get("finished_at"))
    except Exception:  # a record being written right now: the next look sees it
        pass
    return out


class Killer(threading.Thread):
    """kill -9 the worker holding a video's claim, after a random delay, up to ``quota`` times."""

    def __init__(self, store: Path, video_ids: list[str], quota: int, rng: random.Random, max_delay: float):
        super().__init__(daemon=True)
        self.store, self.ids, self.quota = store, video_ids, quota
        self.rng, self.max_delay = rng, max_delay
        self.kills: list[dict] = []
        self.seen: dict[str, str] = {}  # video/stage -> finished_at, first seen done
        self.stop = threading.Event()

    @staticmethod
    def worker_pids() -> set[int]:
        """The Dask worker processes of this process's LocalCluster (multiprocessing children)."""
        import psutil

        out = set()
        for p in psutil.Process().children(recursive=True):
            try:
                if "spawn_main" in " ".join(p.cmdline()):
                    out.add(p.pid)
            except psutil.Error:
                pass
        return out

    def note_finished(self) -> None:
        for k, v in finished_stages(self.store, self.ids).items():
            self.seen.setdefault(k, v)

    def run(self) -> None:
        from anonymask.storage.claims import video_holder
        from anonymask.tasks.common import ORDER

        while not self.stop.is_set() and len(self.kills) < self.quota:
            pids = self.worker_pids()
            target = None
            for vid in self.ids:
                h = video_holder(str(self.store), vid)
                if h and h.get("pid") in pids:
                    target = (vid, h["pid"])
                    break
            if target is None:
                time.sleep(0.05)
                continue
            delay = self.rng.uniform(0.1, self.max_delay)
            if self.stop.wait(delay):
                return
            vid, pid = target
            h = video_holder(str(self.store), vid)
            if not h or h.get("pid") != pid:
                continue  # that video finished (or moved) meanwhile: pick again
            self.note_finished()
            done = {k.split("/", 1)[1] for k in self.seen if k.startswith(vid + "/")}
            in_flight = next((s for s in ORDER if s not in done), "?")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.kills.append({"video": vid, "pid": pid, "stage": in_flight, "delay_s": round(delay, 2)})
            print(f"  kill {len(self.kills)}/{self.quota}: worker {pid} in {vid}/{in_flight} "
                  f"(after {delay:.1f} s holding it)", flush=True)
            time.sleep(0.5)  # let the nanny notice before the next look at the claims


def _hung(report: dict, killer: Killer, out: Path, r: int, limit: float) -> None:
    """A round that never ends is a failure to report, not a soak to wait on forever."""
    report["hang"] = {"round": r, "after_s": limit, "kills_this_round": killer.kills,
                      "worker_processes": sorted(killer.worker_pids())}
    report["ok"] = False
    (out / "dask_kill_soak.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"round {r} still running after {limit:g} s: HUNG; {report['hang']}", flush=True)
    os._exit(1)


def soak(kills: int, out: Path, seed: int = 0, workers: int = 2, per_round: int = 7, max_delay: float = 4.0,
         allowed_failures: int | None = None, reference: Path | None = None, source: Path | None = None,
         round_timeout: float = 900.0) -> dict:
    """``kills`` worker kills over as many rounds as needed (``per_round`` at most each); returns
    the report (also written to ``out/dask_kill_soak.json``). ``source``: the tiny set (else
    generated into ``out/raw``); ``reference``: a store of it computed locally (else a local run
    of the anonymize flow makes one)."""
    import dask

    from anonymask.models.shared.synthetic.generator import generate_demo
    from anonymask.storage.store import DatasetStore

    out.mkdir(parents=True, exist_ok=True)
    source = source or out / "raw"
    if not (source / "dataset.json").exists():
        generate_demo(source, preset="tiny", seed=0)
    t0 = time.perf_counter()
    if reference is None:
        reference = out / "local.zarr"
        if not reference.exists():
            s = run_flow(source, reference, "local", out / "logs")
            if s.get("failed"):
                raise SystemExit(f"the local run failed: {s}")
    ref = digests(reference)
    ids = DatasetStore.open(str(reference), mode="r").video_ids()
    report: dict = {"kills_asked": kills, "seed": seed, "workers": workers, "rounds": [],
                    "reference": str(reference), "arrays_per_round": len(ref)}
    rng = random.Random(seed)
    total = 0
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures or kills + 1}):
        r = 0
        while total < kills:
            r += 1
            store = out / f"dask-{r}.zarr"
            shutil.rmtree(store, ignore_errors=True)
            killer = Killer(store, ids, min(per_round, kills - total), rng, max_delay)
            killer.start()
            t_round = time.perf_counter()
            guard = threading.Timer(round_timeout, _hung, args=(report, killer, out, r, round_timeout))
            guard.daemon = True
            guard.start()
            summary = run_flow(source, store, "dask", out / "logs", workers=workers)
            guard.cancel()
            killer.stop.set()
            killer.join(10)
            total += len(killer.kills)
            now = finished_stages(store, ids)
            recomputed = sorted(k for k, v in killer.seen.items() if now.get(k) != v)
            rows = summary.get("rows", [])
            per_video = {vid: [row["status"] for row in rows if row["video"] == vid] for vid in ids}
            b = digests(store)
            differ = sorted(k for k in set(ref) | set(b) if ref.get(k) != b.get(k))
            rnd = {"round": r, "kills": killer.kills, "seconds": round(time.perf_counter() - t_round, 1),
                   "failed": summary.get("failed"), "failures": summary.get("failures"),
                   "per_video": per_video, "recomputed_after_finish": recomputed,
                   "damage": verify(store), "temp_files": temp_files(store), "arrays": len(b), "differ": differ}
            rnd["ok"] = (all(v == ["done"] for v in per_video.values()) and not recomputed and not rnd["damage"]
                         and not rnd["temp_files"] and not differ and len(b) == len(ref))
            report["rounds"].append(rnd)
            print(f"round {r}: {len(killer.kills)} kills, {rnd['seconds']} s; videos "
                  f"{', '.join(f'{v}={s}' for v, s in per_video.items())}; {len(b)} arrays, {len(differ)} differ "
                  f"from the local run; finished stages recomputed: {len(recomputed)}; verify "
                  f"{'clean' if not rnd['damage'] else rnd['damage']}: {'OK' if rnd['ok'] else 'FAILED'}", flush=True)
            if not killer.kills and r > 1:
                break  # the runs end before any worker holds a claim long enough: no progress possible
    report["kills"] = total
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["stages_hit"] = sorted({k["stage"] for rnd in report["rounds"] for k in rnd["kills"]})
    report["ok"] = total >= kills and all(rnd["ok"] for rnd in report["rounds"])
    (out / "dask_kill_soak.json").write_text(json.dumps(report, indent=2))
    print(f"{total} worker kills in {len(report['rounds'])} rounds ({report['seconds']} s): "
          f"{'OK' if report['ok'] else 'FAILED'}; stages hit: {', '.join(report['stages_hit'])}", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--per-round", type=int, default=7, help="kills per run at most")
    ap.add_argument("--max-delay", type=float, default=4.0,
                    help="a kill comes 0.1 to this many seconds after a worker is seen holding a video")
    ap.add_argument("--allowed-failures", type=int, default=None,
                    help="distributed.scheduler.allowed-failures (default: kills + 1)")
    ap.add_argument("--round-timeout", type=float, default=900.0, help="a run longer than this is a hang: exit 1")
    args = ap.parse_args(argv)
    os.environ.setdefault("PREFECT_HOME", str(args.out / "prefect"))  # its own Prefect database
    from anonymask.cli.prefect_startup import ready_for_flows

    ready_for_flows()
    rep = soak(args.kills, args.out, args.seed, args.workers, args.per_round, args.max_delay, args.allowed_failures,
               round_timeout=args.round_timeout)
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
