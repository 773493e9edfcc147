"""Does memory stay flat and time grow linearly with video length? (`anonymask bench --only scaling`)

Generates one synthetic clip with people (the generator's two-person video), loops it without
re-encoding (packets copied with shifted timestamps) into longer videos, and runs every stage of
the pipeline on each in its own process, recording per stage: seconds, frames/s and the peak
resident memory of that process (``ru_maxrss``; baseline imports included). A stage whose process
goes above ``guard_gb`` is killed and reported as such: that stage's memory grows with the video.
Stages downstream of a killed stage then run on the previous (shorter) video's results repeated
to the new length (the long video *is* the short one looped, frame for frame), and the report says
so for each stage concerned.

``ingest_verify`` does the same for ingest + verify alone on a long full-HD video.

    python -m anonymask.bench.scaling pipeline --seconds 10 60 300 --out scaling.json
    python -m anonymask.bench.scaling ingest --minutes 30 --size 1920x1080 --out ingest30.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_STAGE_CHILD = r"""
import json, resource, sys, time
from anonymask.tasks.common import execute_stage
url, vid, name, cfg = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
t0 = time.perf_counter()
err = None
try:
    res = execute_stage(url, vid, name, cfg)
except Exception as e:
    err = f"{type(e).__name__}: {e}"
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"seconds": time.perf_counter() - t0, "error": err, "vmhwm_kb": hwm}))
"""


def _status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_guarded(cmd: list[str], guard_gb: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd``; kill it if its resident memory exceeds ``guard_gb``. Returns wall seconds, peak
    RSS (GiB: the child's VmHWM, polled; the kernel's ru_maxrss would include the parent's memory
    copied at fork), stdout, and whether it was killed."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        killed = False
        limit_kb = guard_gb * 2**20
        hwm = 0
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            hwm = max(hwm, _status_kb(p.pid, "VmHWM:"))
            if _status_kb(p.pid, "VmRSS:") > limit_kb:
                os.kill(p.pid, signal.SIGKILL)
                killed = True
                pid, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.1)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        try:
            hwm = max(hwm, int(json.loads(stdout.strip().splitlines()[-1]).get("vmhwm_kb") or 0))
        except (ValueError, IndexError, AttributeError):
            pass
        return {
            "wall_s": time.perf_counter() - t0,
            "peak_rss_gb": hwm / 2**20,
            "killed_over_gb": guard_gb if killed else None,
            "returncode": p.returncode,
            "stdout": stdout,
            "stderr_tail": err.read().decode(errors="replace")[-2000:],
        }


# ------------------------------------------------------------------------------ videos
def loop_video(src: str | Path, dst: str | Path, repeats: int) -> Path:
    """``src`` played ``repeats`` times in a row, by copying its packets with shifted timestamps
    (no re-encoding, seconds for any length). ``src`` must start with a keyframe."""
    import av

    with av.open(str(src)) as inp:
        s_in = inp.streams.video[0]
        packets = [p for p in inp.demux(s_in) if p.dts is not None and p.size]
        pts = sorted({p.pts for p in packets})
        # one frame's duration: the smallest step between presentation times (packets come in
        # decode order, where B-frames make neighbouring differences larger)
        step = min((b - a for a, b in zip(pts, pts[1:]) if b > a), default=1)
        span = pts[-1] - pts[0] + step
        with av.open(str(dst), "w", format="mp4") as out:
            s_out = out.add_stream_from_template(s_in)
            for k in range(repeats):
                for p in packets:
                    q = av.Packet(bytes(p))
                    q.pts, q.dts = p.pts + k * span, p.dts + k * span
                    q.time_base = p.time_base
                    q.is_keyframe = p.is_keyframe
                    q.stream = s_out
                    out.mux(q)
    return Path(dst)


def make_clip(folder: Path, width: int, height: int, seconds: float, fps: float = 25.0) -> Path:
    """The synthetic generator's two-person video at this size and length (generated in a child
    process: the generator holds the clip in memory, the measuring process must not)."""
    code = ("import sys; from anonymask.models.shared.synthetic.generator import generate_demo; "
            "generate_demo(sys.argv[1], preset='tiny', seed=0, width=int(sys.argv[2]), height=int(sys.argv[3]), "
            "frames=int(sys.argv[4]), fps=float(sys.argv[5]), supersample=1)")
    subprocess.run([sys.executable, "-c", code, str(folder / "gen"), str(width), str(height),
                    str(int(round(seconds * fps))), str(fps)], check=True)
    return folder / "gen" / "videos" / "s01s02_a02_r01.mp4"


# ------------------------------------------------------------------------------ pipeline
def _stage_cmd(url: str, vid: str, name: str, cfg: dict[str, Any]) -> list[str]:
    return [sys.executable, "-c", _STAGE_CHILD, url, vid, name, json.dumps(cfg)]


def _tile_from(short_url: str, long_url: str, vid: str, stage: str, frames: int) -> None:
    """Give ``long_url``'s video the outputs of ``stage`` from the shorter run, repeated along
    the time axis to ``frames`` frames (the long video is the short one looped), with a record
    whose input hash matches the long video's upstream, so later stages accept it."""
    import numpy as np

    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import input_hash, load_stages

    src = DatasetStore.open(short_url).video(vid)
    dst = DatasetStore.open(long_url).video(vid)
    n = int(src.array("raw").shape[0])
    rec = src.record(stage)
    sd = load_stages()[stage]
    with dst.stage(stage, backend=rec["backend"], config=rec["config"], input_hash=input_hash(dst, sd),
                   deps=sd.deps) as w:
        for name in rec["outputs"]:
            arr = src.array(name)
            shape = tuple(int(x) for x in arr.shape)
            if len(shape) >= 3 and shape[0] == n:  # a per-frame image array: stream it
                with w.frames(name, shape[1:], arr.dtype, frames) as out:
                    done = 0
                    while done < frames:
                        for s0 in range(0, n, 64):
                            take = min(64, n - s0, frames - done)
                            if take <= 0:
                                break
                            out.write(np.asarray(arr[s0 : s0 + take]))
                            done += take
                continue
            data = np.asarray(arr[...])
            axis = next((i for i, d in enumerate(shape) if d == n), None)
            if axis is not None:
                data = np.concatenate([data] * -(-frames // n), axis=axis)
                data = np.take(data, np.arange(frames), axis=axis)
            w.write(name, data, frame_chunked=False)
        w.metric(tiled_from=short_url)


def reuse_store(src: Path, dst: Path, first: str) -> None:
    """``dst`` = a copy of the store ``src`` with the stages from ``first`` on marked stale, so
    they are measured again on the same upstream (pose4d dominates the harness's time; the
    stages before ``first`` need not run again to measure the ones after)."""
    import shutil

    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import ORDER

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    DatasetStore.open(str(dst)).video("v").mark_stale(ORDER[ORDER.index(first):], f"measured again from {first}")


def measure_pipeline(videos: dict[str, Path], work: Path, overrides: dict[str, Any] | None = None,
                     guard_gb: float = 7.0, progress=print, reuse: Path | None = None, first: str | None = None,
                     last: str | None = None) -> dict[str, Any]:
    """Every stage of every video (shortest first) in its own process. ``reuse``: a folder of
    stores of a previous run (``<label>.zarr``), copied, and only the stages from ``first`` on
    measured; ``last``: stop after this stage."""
    from anonymask.config.pipeline import pipeline_config
    from anonymask.storage.store import DatasetStore, VideoInfo
    from anonymask.tasks.common import ORDER

    cfg = pipeline_config("folder", overrides or {})
    out: dict[str, Any] = {"guard_gb": guard_gb, "config_overrides": overrides or {}, "videos": {}}
    stages = ORDER[ORDER.index(first) if first else 0 : ORDER.index(last) + 1 if last else len(ORDER)]
    prev_url = None
    for label, path in videos.items():
        url = str(work / f"{label}.zarr")
        frames = None
        if reuse is not None:
            reuse_store(Path(reuse) / f"{label}.zarr", Path(url), stages[0])
            frames = int(DatasetStore.open(url).video("v").attrs["frames"])
        else:
            s = DatasetStore.create(url, "folder", stages=ORDER, config=cfg, overwrite=True)
            s.register_videos([VideoInfo("v", path=str(path))])
        res: dict[str, Any] = {"path": str(path), "stages": {}, **({"frames": frames} if frames else {})}
        for name in stages:
            r = run_guarded(_stage_cmd(url, "v", name, cfg), guard_gb)
            child = json.loads(r["stdout"].strip().splitlines()[-1]) if r["stdout"].strip() else {}
            row = {"seconds": round(child.get("seconds", r["wall_s"]), 2),
                   "peak_rss_gb": round(r["peak_rss_gb"], 3), "killed_over_gb": r["killed_over_gb"],
                   "error": child.get("error") or (None if r["returncode"] == 0 else r["stderr_tail"][-300:])}
            if name == "ingest" and not row["error"]:
                frames = int(DatasetStore.open(url).video("v").attrs["frames"])
                res["frames"] = frames
            if frames and row["seconds"] and not row["killed_over_gb"]:
                row["frames_per_s"] = round(frames / row["seconds"], 2)
            res["stages"][name] = row
            progress(f"[scaling] {label} {name}: {json.dumps(row)}")
            # tubelet arrays cover their people's frames, not the video's: they cannot be tiled
            if row["killed_over_gb"] and prev_url and frames and name not in ("tubelets", "conditions", "refine"):
                _tile_from(prev_url, url, "v", name, frames)  # so the stages after it can be measured
                row["outputs_tiled_from_shorter_video"] = True
            elif row["error"] or row["killed_over_gb"]:
                break
        out["videos"][label] = res
        prev_url = url
    return out


# ------------------------------------------------------------------------------ ingest + verify
_INGEST_VERIFY_CHILD = r"""
import json, sys, time
from anonymask.config.pipeline import pipeline_config
from anonymask.storage.inspect import verify_store
from anonymask.storage.store import DatasetStore, VideoInfo
from anonymask.tasks.common import ORDER, execute_stage
url, path, what = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
if what == "ingest":
    s = DatasetStore.create(url, "folder", stages=ORDER, overwrite=True)
    s.register_videos([VideoInfo("v", path=path)])
    execute_stage(url, "v", "ingest", pipeline_config("folder", json.loads(sys.argv[4])))
    e = DatasetStore.open(url).video("v")
    out = {"seconds": time.perf_counter() - t0, "frames": e.attrs["frames"],
           "size": [e.attrs["height"], e.attrs["width"]], "decode": e.attrs["decode"]}
else:
    res = verify_store(DatasetStore.open(url))
    out = {"seconds": time.perf_counter() - t0, "ok": res.ok, "arrays": res.checked_arrays,
           "damaged": res.damaged[:5]}
out["vmhwm_kb"] = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps(out))
"""


def measure_ingest_verify(video: Path, work: Path, overrides: dict[str, Any] | None = None,
                          guard_gb: float = 7.0) -> dict[str, Any]:
    url = str(work / "ingest.zarr")
    out = {}
    for what in ("ingest", "verify"):
        r = run_guarded([sys.executable, "-c", _INGEST_VERIFY_CHILD, url, str(video), what,
                         json.dumps(overrides or {})], guard_gb)
        child = json.loads(r["stdout"].strip().splitlines()[-1]) if r["stdout"].strip() else {}
        out[what] = {**child, "peak_rss_gb": round(r["peak_rss_gb"], 3), "killed_over_gb": r["killed_over_gb"],
                     "error": None if r["returncode"] == 0 else r["stderr_tail"][-500:]}
    frames = out["ingest"].get("frames")
    for what in ("ingest", "verify"):
        if frames and out[what].get("seconds"):
            out[what]["frames_per_s"] = round(frames / out[what]["seconds"], 1)
    out["store_bytes"] = sum(p.stat().st_size for p in Path(url).rglob("*") if p.is_file())
    out["video_bytes"] = Path(video).stat().st_size
    return out


def bench_scaling(quick: bool) -> dict[str, Any]:
    """`anonymask bench --only scaling`: quick = 2/4/8 s at 320x180 (a smoke run of the harness)."""
    work = Path(tempfile.mkdtemp(prefix="anonymask-scaling-"))
    size, secs = ((320, 180), [2, 4, 8]) if quick else ((1280, 720), [10, 60, 300])
    clip = make_clip(work, *size, seconds=secs[0])
    videos = {f"{s}s": (clip if s == secs[0] else loop_video(clip, work / f"{s}s.mp4", s // secs[0])) for s in secs}
    return {"size": list(size), "seconds": secs, **measure_pipeline(videos, work)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m anonymask.bench.scaling")
    sub = p.add_subparsers(dest="what", required=True)
    a = sub.add_parser("pipeline")
    a.add_argument("--seconds", type=int, nargs="+", default=[10, 60, 300])
    a.add_argument("--size", default="1280x720")
    a.add_argument("--guard-gb", type=float, default=7.0)
    a.add_argument("--work", default=None)
    a.add_argument("--out", required=True)
    a.add_argument("--reuse", default=None, help="a previous run's --work: copy its stores, measure from --first")
    a.add_argument("--first", default=None, help="first stage to measure (with --reuse)")
    a.add_argument("--last", default=None, help="last stage to measure")
    a.add_argument("--set", nargs="*", default=[], metavar="STAGE.KEY=VALUE",
                   help="pipeline settings for every stage, as in `anonymask run --set`")
    b = sub.add_parser("ingest")
    b.add_argument("--minutes", type=float, default=30)
    b.add_argument("--size", default="1920x1080")
    b.add_argument("--clip-seconds", type=float, default=4)
    b.add_argument("--max-side", type=int, default=None, help="ingest.max_side (default: the pipeline's)")
    b.add_argument("--guard-gb", type=float, default=7.0)
    b.add_argument("--work", default=None)
    b.add_argument("--out", required=True)
    args = p.parse_args(argv)
    w, h = (int(x) for x in args.size.split("x"))
    work = Path(args.work or tempfile.mkdtemp(prefix="anonymask-scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if args.what == "pipeline":
        secs = sorted(args.seconds)
        if args.reuse:
            videos = {f"{s}s": Path(args.reuse) / f"{s}s.mp4" for s in secs}
        else:
            clip = make_clip(work, w, h, seconds=secs[0])
            videos = {f"{s}s": (clip if s == secs[0] else loop_video(clip, work / f"{s}s.mp4", s // secs[0]))
                      for s in secs}
        from anonymask.config.pipeline import parse_overrides

        res = {"size": [w, h], "seconds": secs, **measure_pipeline(videos, work, parse_overrides(args.set),
                                                                   guard_gb=args.guard_gb,
                                                                   reuse=args.reuse, first=args.first,
                                                                   last=args.last)}
    else:
        clip = make_clip(work, w, h, seconds=args.clip_seconds)
        reps = int(round(args.minutes * 60 / args.clip_seconds))
        video = loop_video(clip, work / f"long_{args.minutes:g}min.mp4", reps)
        over = {"ingest": {"max_side": args.max_side}} if args.max_side else {}
        res = {"size": [w, h], "minutes": args.minutes, "ingest_overrides": over,
               **measure_ingest_verify(video, work, over, guard_gb=args.guard_gb)}
    from anonymask.bench.common import machine

    res["machine"] = machine()
    res["started"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0))
    res["wall_s"] = round(time.time() - t0, 1)
    Path(args.out).write_text(json.dumps(res, indent=2, default=str))
    print(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
