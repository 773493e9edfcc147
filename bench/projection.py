"""Projections on paper: hours to anonymize and to train each private mode on NTU-60, Toyota
Smarthome and UCF-101, on this 2-core machine, a 64-core Dask cluster, one GPU and eight GPUs
(issue 31 item 3). Arithmetic on measured per-frame and per-clip costs; every number that was not
measured is named an assumption in ``ASSUMPTIONS`` and in the output.

    python -m anonymask.bench.projection            # JSON
    python -m anonymask.bench.projection --markdown # the tables of docs/BENCHMARKS.md

It generalises ``anonymask.bench.harness.ntu60_projection`` (videos x frames x cost per frame / workers)
to the three datasets and adds training: cache build (the frozen MViTv2-S prefix once per clip and
input variant, train + eval clips) + epochs x training clips x cost per clip of one step.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from anonymask.bench.common import NTU60_ASSUMED_FRAMES, NTU60_VIDEOS

#: Dataset sizes (given) and what we assume about them (marked). ``persons``: people refined per
#: frame (Rend.+Diff refines one tubelet per person).
DATASETS: dict[str, dict[str, Any]] = {
    "ntu60": {
        "name": "NTU-60", "videos": NTU60_VIDEOS, "frames_per_video": NTU60_ASSUMED_FRAMES,
        "length": "90 frames = 3 s at 30 fps (assumed: clips run ~1-10 s)", "ingest": "640x360",
        "train_clips": 40_320, "eval_clips": 16_560, "split": "xsub (40,320 / 16,560)", "epochs": 150,
        "persons": 1.18, "persons_note": "11 of the 60 classes are two-person interactions: 1 + 11/60",
    },
    "tsh": {
        "name": "Toyota Smarthome", "videos": 16_115, "frames_per_video": 400,
        "length": "400 frames = 20 s at 20 fps (assumed: the authors describe clips of a few seconds to "
                  "a few minutes; their mean is not checked here)", "ingest": "640x480",
        "train_clips": 9_850, "eval_clips": 6_265,
        "split": "xsub, 11 of 18 performers train: 9,850 / 6,265 assumed in proportion to performers",
        "epochs": 150, "persons": 1.0, "persons_note": "one performer per video (assumed)",
    },
    "ucf101": {
        "name": "UCF-101", "videos": 13_320, "frames_per_video": 180,
        "length": "180 frames = 7.2 s at 25 fps (the dataset's ~27 h over 13,320 clips)", "ingest": "320x240",
        "train_clips": 9_537, "eval_clips": 3_783, "split": "split1 (9,537 / 3,783)", "epochs": 300,
        "persons": 1.5, "persons_note": "assumed (web videos, often more than one person)",
    },
}  # fmt: skip

#: Measured costs, with where they come from (docs/BENCHMARKS.md; docs/results/gpu/2026-11-26.json).
MEASURED: dict[str, Any] = {
    # anonymize pipeline, default offline backends, refine=none, 640x480, the whole 2-core VM idle
    # (`anonymask bench --only pipeline`, 2026-11-26 00:06 UTC): 2.56 frames/s
    "cpu_pipeline_frames_per_s_2core": 2.56,
    # MViTv2-S on 1 thread of this VM (round-robin run, 2026-11-23, docs/results/tail_steps_rr.json):
    # prefix forward per clip; one step of the cached tail per clip (batch 8 / 8)
    "cpu_prefix_s_per_clip_1thread": 2.93,
    "cpu_step_s_per_clip_1thread": {"nonprivate": 5.52 / 8, "dp": 6.88 / 8, "maskdp": 12.58 / 8,
                                    "fpdp": 12.63 / 8},  # fmt: skip
    # one NVIDIA H200, bf16 (make gpu-check, 2026-11-26): prefix clips/s at batch 32, step s at batch 128
    "gpu_prefix_clips_per_s": 254.2,
    "gpu_step_s_batch128": {"nonprivate": 0.1322, "dp": 0.1454, "maskdp": 0.2774, "fpdp": 0.2769},
    # refinement, 16 frames 512x512 fp16 on the H200, projected to the default 12 steps (s per frame)
    "gpu_refine_s_per_frame_default": 0.2452,
    # torch.utils.flop_counter on MViTv2-S, 16x224x224 (scripts/paper_protocol_dry_run.py)
    "flops_prefix_forward": 112e9,
    "flops_tail_forward_backward": 34e9,
}

#: Hardware and scaling assumptions (none measured).
ASSUMPTIONS: dict[str, str] = {
    "this_machine": "the project's VM: 2 cores; anonymization at the measured 2.56 frames/s (both cores: "
                    "the landmark model already uses 2 threads); training with both cores at the 1-thread "
                    "per-clip costs (2 x 1 thread, ideal)",
    "dask64": "64 cores of this VM's speed as 32 Dask workers of 2 cores, each as fast as this machine; "
              "videos are independent, so time divides by 32; store I/O keeps up. Training: 64 x the "
              "1-thread per-clip rate, an upper bound (the trainer runs in one process today; DP-SGD's "
              "per-sample work is data-parallel in principle)",
    "gpu1": "one H200 as measured, in a host with 16 cores of this VM's speed (the lent box): the "
            "anonymize pipeline's offline backends stay on the CPU (8 x this machine), refinement on the "
            "GPU concurrently (pipelined: the slower of the two sets the time); the cache build at the "
            "measured prefix rate, which the host's data loader must keep up with (not measured)",
    "gpu8": "eight such GPUs (each with its 16 cores), ideal scaling over videos and, for training, "
            "over the batch (data-parallel training is not implemented in the trainer today)",
    "training": "1 clip per video (clips_per_video=1), expected batch 128 (Poisson), epoch = train clips x "
                "cost per clip; cache = prefix once per clip and input variant (DP-SGD / non-private: "
                "full; MaskDP: private + public; FP-DP: full + blur) on train clips + once (full) on eval "
                "clips; MaskDP/FP-DP at the papers' public batch (= B); FP-DP's holdout public videos (10% "
                "of the training videos by default) counted as training clips; evaluation passes and FP-DP's "
                "subspace refreshes (every 50 steps) left out; clips stored at the ingest size need a "
                "resize to 224 that the measured prefix rate does not include",
    "refine_cpu": "Rend.+Diff refinement is not budgeted on CPU: its full-size CPU cost is not measured "
                  "(issue 31 item 1)",
}

HARDWARE = ("this_machine", "dask64", "gpu1", "gpu8")
MODES = ("nonprivate", "dp", "maskdp", "fpdp")
_CACHE_VARIANTS = {"nonprivate": 1, "dp": 1, "maskdp": 2, "fpdp": 2}


def anonymize_hours(ds: dict[str, Any], m: dict[str, Any] = MEASURED) -> dict[str, dict[str, float | None]]:
    """Hours to anonymize a dataset, Render (refine=none) and Rend.+Diff, per hardware."""
    frames = ds["videos"] * ds["frames_per_video"]
    machine_s = frames / m["cpu_pipeline_frames_per_s_2core"]  # one 2-core machine
    refine_s = frames * ds["persons"] * m["gpu_refine_s_per_frame_default"]  # one GPU
    cpu = {"this_machine": machine_s, "dask64": machine_s / 32, "gpu1": machine_s / 8, "gpu8": machine_s / 64}
    out: dict[str, dict[str, float | None]] = {"render": {}, "rend_diff": {}}
    for hw in HARDWARE:
        out["render"][hw] = round(cpu[hw] / 3600, 1)
        gpus = {"gpu1": 1, "gpu8": 8}.get(hw)
        out["rend_diff"][hw] = None if gpus is None else round(max(cpu[hw], refine_s / gpus) / 3600, 1)
    return out


def per_clip_seconds(hw: str, m: dict[str, Any] = MEASURED) -> dict[str, Any]:
    """(prefix s per clip and variant, {mode: step s per clip}) on one hardware setting."""
    if hw in ("this_machine", "dask64"):
        cores = 2 if hw == "this_machine" else 64
        return {"prefix": m["cpu_prefix_s_per_clip_1thread"] / cores,
                "step": {k: v / cores for k, v in m["cpu_step_s_per_clip_1thread"].items()}}  # fmt: skip
    gpus = 1 if hw == "gpu1" else 8
    return {"prefix": 1.0 / m["gpu_prefix_clips_per_s"] / gpus,
            "step": {k: v / 128 / gpus for k, v in m["gpu_step_s_batch128"].items()}}  # fmt: skip


def training_hours(ds: dict[str, Any], m: dict[str, Any] = MEASURED) -> dict[str, dict[str, dict[str, float]]]:
    """{mode: {hardware: {cache_h, epoch_h, total_h}}}: cache build + epochs x train clips x step."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for mode in MODES:
        out[mode] = {}
        for hw in HARDWARE:
            c = per_clip_seconds(hw, m)
            cache = (_CACHE_VARIANTS[mode] * ds["train_clips"] + ds["eval_clips"]) * c["prefix"]
            epoch = ds["train_clips"] * c["step"][mode]
            out[mode][hw] = {"cache_h": round(cache / 3600, 3), "epoch_h": round(epoch / 3600, 4),
                             "total_h": round((cache + ds["epochs"] * epoch) / 3600, 2)}  # fmt: skip
    return out


def flop_rates(m: dict[str, Any] = MEASURED) -> dict[str, float]:
    """Sustained FLOP/s the measurements imply (the FLOP counts / the measured times): a check that
    CPU and GPU numbers are consistent, and what an assumed peak would overstate."""
    return {
        "cpu_prefix_gflops_per_core": round(m["flops_prefix_forward"] / m["cpu_prefix_s_per_clip_1thread"] / 1e9, 1),
        "cpu_dp_step_gflops_per_core": round(m["flops_tail_forward_backward"] / m["cpu_step_s_per_clip_1thread"]["dp"] / 1e9, 1),
        "gpu_prefix_tflops": round(m["flops_prefix_forward"] * m["gpu_prefix_clips_per_s"] / 1e12, 1),
        "gpu_dp_step_tflops": round(m["flops_tail_forward_backward"] * 128 / m["gpu_step_s_batch128"]["dp"] / 1e12, 1),
    }  # fmt: skip


def projections(m: dict[str, Any] = MEASURED) -> dict[str, Any]:
    return {
        "measured": m, "assumptions": ASSUMPTIONS, "flop_rates": flop_rates(m),
        "datasets": {k: {"given_and_assumed": ds, "anonymize_hours": anonymize_hours(ds, m),
                         "training_hours": training_hours(ds, m)} for k, ds in DATASETS.items()},
    }  # fmt: skip


def _h(x: float | None) -> str:
    if x is None:
        return "not budgeted"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:.1f}"
    return f"{x * 60:.0f} min" if x * 60 >= 1 else "<1 min"


def markdown(p: dict[str, Any]) -> str:
    names = {"this_machine": "this 2-core VM", "dask64": "64-core Dask", "gpu1": "1 GPU (H200)", "gpu8": "8 GPUs"}
    lines = ["| dataset | what | " + " | ".join(names[h] for h in HARDWARE) + " |", "|---|---|" + "---|" * len(HARDWARE)]
    for k, d in p["datasets"].items():
        n = DATASETS[k]["name"]
        for v, label in (("render", "anonymize, Render (refine=none)"), ("rend_diff", "anonymize, Rend.+Diff")):
            lines.append(f"| {n} | {label} | " + " | ".join(_h(d["anonymize_hours"][v][h]) for h in HARDWARE) + " |")
        for mode in MODES:
            t = d["training_hours"][mode]
            lines.append(f"| {n} | train {mode} ({DATASETS[k]['epochs']} epochs; cache) | "
                         + " | ".join(f"{_h(t[h]['total_h'])} ({_h(t[h]['cache_h'])})" for h in HARDWARE) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    p = projections()
    print(markdown(p) if a.markdown else json.dumps(p, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
