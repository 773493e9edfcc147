"""Timing of the refiner, on tiny weights (CPU) or full-size random weights (GPU).

Full-size random weights have the real architectures (SD 1.5 UNet, AnimateDiff v1.5-2 motion
adapter, three SD 1.5 ControlNets, SD VAE, CLIP ViT-L/14 text encoder) with random values, written
in the real layout: the compute per step is the real one, so timings transfer, without any download.
The configs are written out here from the published architectures (nothing is fetched).

    python -m anonymask.bench.refine --build-random /tmp/w --size 512 --frames 16 --steps 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch

from anonymask.bench.common import emit, peak_rss_gb
from anonymask.core.compat import ensure_torchvision
from anonymask.models.anonymizer.refine.tiny import (
    BOS,
    EOS,
    TOKENIZER_MAX_LENGTH,
    byte_vocab,
    randomize_zero_parameters,
    save_refiner_folder,
    sd15_scheduler_config,
)
from anonymask.models.anonymizer.refine.weights import CONTROLNET_FOLDERS


def sd15_unet_config() -> dict:
    """Stable Diffusion 1.5's UNet (860 M parameters)."""
    return {
        "sample_size": 64,
        "in_channels": 4,
        "out_channels": 4,
        "center_input_sample": False,
        "flip_sin_to_cos": True,
        "freq_shift": 0,
        "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
        "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
        "block_out_channels": [320, 640, 1280, 1280],
        "layers_per_block": 2,
        "downsample_padding": 1,
        "mid_block_scale_factor": 1,
        "act_fn": "silu",
        "norm_num_groups": 32,
        "norm_eps": 1e-5,
        "cross_attention_dim": 768,
        "attention_head_dim": 8,
    }


def animatediff_v152_adapter_config() -> dict:
    """AnimateDiff motion adapter v1.5-2 (motion modules in every block and in the middle)."""
    return {
        "block_out_channels": [320, 640, 1280, 1280],
        "motion_layers_per_block": 2,
        "motion_mid_block_layers_per_block": 1,
        "motion_num_attention_heads": 8,
        "motion_norm_num_groups": 32,
        "motion_max_seq_length": 32,
        "use_motion_mid_block": True,
    }


def sd_vae_config() -> dict:
    """Stable Diffusion's KL autoencoder (8x downsampling, 4 latent channels)."""
    return {
        "in_channels": 3,
        "out_channels": 3,
        "down_block_types": ["DownEncoderBlock2D"] * 4,
        "up_block_types": ["UpDecoderBlock2D"] * 4,
        "block_out_channels": [128, 256, 512, 512],
        "layers_per_block": 2,
        "act_fn": "silu",
        "latent_channels": 4,
        "norm_num_groups": 32,
        "sample_size": 512,
        "scaling_factor": 0.18215,
    }


def clip_vit_l14_text_config(vocab: dict[str, int]) -> dict:
    """CLIP ViT-L/14's text tower (SD 1.5's text encoder), ids taken from ``vocab``."""
    return {
        "vocab_size": 49408,
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "max_position_embeddings": TOKENIZER_MAX_LENGTH,
        "hidden_act": "quick_gelu",
        "projection_dim": 768,
        "bos_token_id": vocab[BOS],
        "eos_token_id": vocab[EOS],
        "pad_token_id": vocab[EOS],
    }


def build_full_size_random_weights(
    folder: str | os.PathLike,
    seed: int = 0,
    dtype: torch.dtype = torch.float16,
    device: str | torch.device | None = None,
) -> Path:
    """Write full-size, randomly initialised refinement weights under ``folder/refine/`` (~5 GB fp16).

    Building takes minutes of CPU and ~10 GB of memory; meant for GPU benchmarks. ``device`` (e.g.
    "cuda") builds and initialises the modules there instead (seconds on a GPU, ~10 GB of its
    memory while building); the files written are the same layout either way.
    """
    from contextlib import nullcontext

    ensure_torchvision()
    from diffusers import AutoencoderKL, ControlNetModel, MotionAdapter, PNDMScheduler, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    where = torch.device(device) if device is not None else nullcontext()
    with torch.random.fork_rng(devices=[]), where:
        torch.manual_seed(seed)
        unet = UNet2DConditionModel(**sd15_unet_config())
        controlnets = {}
        for i, key in enumerate(CONTROLNET_FOLDERS):
            net = ControlNetModel.from_unet(unet)  # SD 1.5 ControlNets are UNet encoder copies
            randomize_zero_parameters(net, std=0.02, seed=seed + 1 + i)
            controlnets[key] = net.to(dtype)
        unet = unet.to(dtype)
        adapter = MotionAdapter(**animatediff_v152_adapter_config()).to(dtype)
        vae = AutoencoderKL(**sd_vae_config()).to(dtype)
        text_encoder = CLIPTextModel(CLIPTextConfig(**clip_vit_l14_text_config(byte_vocab()))).to(dtype)
    if device is not None:  # saved from host memory, as from a CPU build
        unet, adapter, vae, text_encoder = (m.to("cpu") for m in (unet, adapter, vae, text_encoder))
        controlnets = {k: m.to("cpu") for k, m in controlnets.items()}
    return save_refiner_folder(
        folder,
        unet=unet,
        motion_adapter=adapter,
        controlnets=controlnets,
        vae=vae,
        text_encoder=text_encoder,
        scheduler=PNDMScheduler(**sd15_scheduler_config()),
    )


def real_crop(path: str | os.PathLike, frames: int, size: int, start: int = 0) -> np.ndarray:
    """``frames`` frames of a real video from ``start``: the centre square, resized to ``size``."""
    import cv2

    from anonymask.storage.video_io import read_frames

    video = read_frames(path, start=start, max_frames=frames)
    h, w = video.shape[1:3]
    side = min(h, w)
    y0, x0 = (h - side) // 2, (w - side) // 2
    return np.stack([cv2.resize(f[y0 : y0 + side, x0 : x0 + side], (size, size), interpolation=cv2.INTER_AREA)
                     for f in video])


def frame_step_profile(output: np.ndarray) -> np.ndarray:
    """(T-1,) mean absolute difference between frames t and t+1 of a (T, ...) array (a video, latents)."""
    v = np.asarray(output, dtype=np.float32)
    return np.abs(v[1:] - v[:-1]).reshape(len(v) - 1, -1).mean(axis=1)


def seam_report(output: np.ndarray, schedule: list[list[int]]) -> dict[str, Any]:
    """Frame-to-frame differences of ``output`` at window edges vs inside the windows.

    A pair (t, t+1) is an edge where a contiguous window of ``schedule`` ends at t or starts at
    t+1, a seam where no window holds both frames, and inside where it is no edge. A seam that
    shows has edge/inside ratios > 1; windows that blend have ratios ~1.
    """
    steps = frame_step_profile(output)
    contiguous = [w for w in schedule if all(b == a + 1 for a, b in zip(w[:-1], w[1:]))]
    together = {a for w in contiguous for a in w[:-1]}
    edges = sorted({w[-1] for w in contiguous if w[-1] < len(steps)} | {w[0] - 1 for w in contiguous if w[0] > 0})
    inside = [t for t in range(len(steps)) if t not in edges]
    median_inside = float(np.median(steps[inside])) if inside else float("nan")

    def neighbours(t: int) -> float:  # the pairs up to 2 away that are no edge: the video's own motion there
        near = [u for u in range(t - 2, t + 3) if u != t and 0 <= u < len(steps) and u not in edges]
        return float(np.median(steps[near])) if near else float("nan")

    return {
        "frame_step_mad": [float(f"{x:.4g}") for x in steps],
        "edge_pairs": edges,
        "seam_pairs": [t for t in range(len(steps)) if t not in together],
        "edge_mad": [float(f"{steps[t]:.4g}") for t in edges],
        "inside_median_mad": float(f"{median_inside:.4g}"),
        "edge_over_inside": [round(float(steps[t]) / median_inside, 3) for t in edges],
        "edge_over_neighbours": [round(float(steps[t]) / neighbours(t), 3) for t in edges],
    }


@contextmanager
def frame_shared_noise():
    """Within this block the refiner's randomness is the same for every frame: the initial noise is
    drawn for one frame and repeated along the frame axis, and VAE encoding takes the posterior mean.

    With a static input (one frame repeated), every frame then enters the denoiser identical, so
    any frame-to-frame difference of the output comes from the temporal model and the windows it
    is run in: a seam between windows shows as a jump (:func:`seam_report`).
    """
    ensure_torchvision()  # before diffusers is imported
    import diffusers.utils.torch_utils as tu
    from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution

    draw, sample = tu.randn_tensor, DiagonalGaussianDistribution.sample

    def one_frame(shape, *args, **kwargs):  # the refiner draws (1, T, C, h, w)
        return draw((shape[0], 1, *shape[2:]), *args, **kwargs).expand(shape).contiguous()

    tu.randn_tensor = one_frame
    DiagonalGaussianDistribution.sample = lambda self, generator=None: self.mean
    try:
        yield
    finally:
        tu.randn_tensor, DiagonalGaussianDistribution.sample = draw, sample


@contextmanager
def capture_final_latents(into: list, active: bool = True):
    """Within this block every refiner call appends its denoised latents to ``into`` (CPU copies)."""
    if not active:
        yield
        return
    from anonymask.models.anonymizer.refine.animatediff import AnimateDiffRefiner

    decode = AnimateDiffRefiner._decode

    def keep(self, latents):
        into.append(latents.detach().to("cpu", torch.float32))
        return decode(self, latents)

    AnimateDiffRefiner._decode = keep
    try:
        yield
    finally:
        AnimateDiffRefiner._decode = decode


def bench_refine(
    weights_root: str | os.PathLike | None,
    frames: int = 16,
    size: int = 512,
    steps: int = 4,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    repeats: int = 2,
    seed: int = 0,
    warmup: bool = True,
    video: np.ndarray | None = None,
    keep_output: bool = False,
    **refiner_kwargs: Any,
) -> dict[str, Any]:
    """Time ``repeats`` refinements of a random ``frames`` x ``size`` x ``size`` crop after one warm-up.

    ``strength`` defaults to 1 so every one of ``steps`` denoising steps runs. Returns a JSON-ready
    dict: seconds_per_step (median over all timed steps), seconds_per_call, encode/decode seconds,
    windows per step, peak GPU memory, peak resident memory of this process, the last output's
    shape, dtype and value range, and what ran where. ``warmup=False`` skips the warm-up call (a
    full-size CPU run, where one call takes many minutes). ``video`` (T,S,S,3) uint8 replaces the
    random crop (its frames also serve as the three conditions, depth as grey); ``keep_output``
    adds the last output array under ``"output_array"`` (not JSON-ready).
    """
    from anonymask.models.anonymizer.refine.animatediff import CONDITION_KEYS, AnimateDiffRefiner

    refiner_kwargs.setdefault("strength", 1.0)
    start = time.perf_counter()
    refiner = AnimateDiffRefiner(weights_root, device=device, dtype=dtype, num_inference_steps=steps, **refiner_kwargs)
    load_seconds = time.perf_counter() - start
    rng = np.random.default_rng(seed)
    if video is None:
        video = rng.integers(0, 256, (frames, size, size, 3), dtype=np.uint8)
        conditions = {k: rng.integers(0, 256, (frames, size, size, 3), dtype=np.uint8) for k in CONDITION_KEYS}
    else:
        frames, size = video.shape[0], video.shape[1]
        grey = video.mean(axis=-1, keepdims=True).round().astype(np.uint8).repeat(3, axis=-1)
        conditions = {"depth": grey, "pose": video, "face": video}
    cuda = refiner.device.type == "cuda"
    if warmup:
        refiner.refine(video, conditions, seed=seed)  # warm-up: kernels, allocator, text embeddings
    if cuda:
        torch.cuda.reset_peak_memory_stats(refiner.device)
    step_seconds, call_seconds, encode, decode = [], [], [], []
    out = video
    for i in range(repeats):
        begin = refiner._sync()
        out = refiner.refine(video, conditions, seed=seed + 1 + i)
        call_seconds.append(refiner._sync() - begin)
        stats = refiner.last_stats
        step_seconds += stats["step_seconds"]
        encode.append(stats["encode_seconds"])
        decode.append(stats["decode_seconds"])
    import diffusers

    result = {
        "benchmark": "refine",
        "frames": frames,
        "size": size,
        "steps_run": refiner.last_stats["steps_run"],
        "windows_per_step": refiner.last_stats["windows"][0] if refiner.last_stats["windows"] else 0,
        "seconds_per_step": statistics.median(step_seconds) if step_seconds else 0.0,
        "seconds_per_call": statistics.median(call_seconds),
        "encode_seconds": statistics.median(encode),
        "decode_seconds": statistics.median(decode),
        "load_seconds": load_seconds,
        "repeats": repeats,
        "device": str(refiner.device),
        "device_name": torch.cuda.get_device_name(refiner.device) if cuda else platform.processor() or "cpu",
        "dtype": str(refiner.dtype).replace("torch.", ""),
        "torch": torch.__version__,
        "diffusers": diffusers.__version__,
        "guidance": refiner.guidance_scale > 1.0,
        "window": refiner.window,
        "stride": refiner.stride,
        "window_dilations": list(refiner.window_dilations),
        "step_seconds": step_seconds,
        "peak_rss_gb": peak_rss_gb(),
        "output": {"shape": list(out.shape), "dtype": str(out.dtype), "min": int(out.min()), "max": int(out.max()),
                   "mean": float(out.mean())},
    }
    if keep_output:
        result["output_array"] = out
    if cuda:
        result["peak_memory_gb"] = torch.cuda.max_memory_allocated(refiner.device) / 2**30
    return result


def bench_autocast_agreement(
    weights_root: str | os.PathLike | None,
    frames: int = 16,
    size: int = 128,
    autocast_dtype: torch.dtype = torch.bfloat16,
    guidance_scale: float = 1.0,
    seed: int = 0,
) -> dict[str, Any]:
    """One guided noise prediction (3 ControlNets + motion UNet, one window of ``frames``) in fp32
    and under CPU autocast to ``autocast_dtype``, on the same random latents and conditions: the
    difference relative to the fp32 prediction's scale (its RMS), and the time of each (after one
    fp32 warm-up call)."""
    from anonymask.models.anonymizer.refine.animatediff import AnimateDiffRefiner

    refiner = AnimateDiffRefiner(weights_root, device="cpu", dtype=torch.float32, num_inference_steps=25,
                                 strength=1.0, guidance_scale=guidance_scale)
    gen = torch.Generator().manual_seed(seed)
    h = size // refiner.pipe.vae_scale_factor
    latents = torch.randn((1, 4, frames, h, h), generator=gen)
    conds = [torch.rand((frames, 3, size, size), generator=gen) for _ in range(3)]
    refiner.pipe.scheduler.set_timesteps(25)
    t = refiner.pipe.scheduler.timesteps[12]  # mid-way
    window = [list(range(frames))]
    with torch.inference_mode():
        text = refiner._text_embeddings()
        refiner._predict_windows(latents, t, window, text, conds, None)  # warm-up
        start = time.perf_counter()
        ref = refiner._predict_windows(latents, t, window, text, conds, None)[0].float()
        fp32_seconds = time.perf_counter() - start
        with torch.autocast("cpu", dtype=autocast_dtype):
            start = time.perf_counter()
            low = refiner._predict_windows(latents, t, window, text, conds, None)[0].float()
            low_seconds = time.perf_counter() - start
    diff = (low - ref).abs()
    scale = ref.pow(2).mean().sqrt()
    return {
        "benchmark": "refine_autocast_agreement",
        "frames": frames,
        "size": size,
        "autocast_dtype": str(autocast_dtype).replace("torch.", ""),
        "guidance": refiner.guidance_scale > 1.0,
        "timestep": int(t),
        "fp32_rms": float(scale),
        "fp32_abs_max": float(ref.abs().max()),
        "max_abs_diff": float(diff.max()),
        "mean_abs_diff": float(diff.mean()),
        "max_abs_diff_over_rms": float(diff.max() / scale),
        "mean_abs_diff_over_rms": float(diff.mean() / scale),
        "cosine": float(torch.nn.functional.cosine_similarity(low.flatten(), ref.flatten(), dim=0)),
        "fp32_seconds": fp32_seconds,
        "autocast_seconds": low_seconds,
        "peak_rss_gb": peak_rss_gb(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weights", help="weights root (default $ANONYMASK_WEIGHTS)")
    parser.add_argument("--build-random", metavar="DIR", help="first write full-size random weights to DIR")
    parser.add_argument("--build-tiny", metavar="DIR", help="first write tiny random weights to DIR")
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device")
    parser.add_argument("--dtype", choices=["float16", "bfloat16", "float32"])
    parser.add_argument("--guidance", type=float, default=7.5)
    parser.add_argument("--strength", type=float, default=1.0)
    parser.add_argument("--stride", type=int, help="window stride (refiner default 8)")
    parser.add_argument("--dilations", help="window dilations, comma-separated (refiner default 1,2)")
    parser.add_argument("--no-warmup", action="store_true", help="time the first call (full size on a CPU)")
    parser.add_argument("--video", help="a real video: its centre square, resized to --size, replaces the random crop")
    parser.add_argument("--seam", action="store_true", help="add the frame-to-frame differences at window seams")
    parser.add_argument("--static", action="store_true",
                        help="one frame repeated (of --video, else random) and noise shared by all frames")
    parser.add_argument("--shared-noise", action="store_true",
                        help="noise shared by all frames (seams: the video's own motion, no per-frame noise)")
    parser.add_argument("--autocast-check", choices=["bfloat16", "float16"],
                        help="instead of timing: one noise prediction in fp32 and under CPU autocast, compared")
    parser.add_argument("--out", help="write the JSON result here too")
    args = parser.parse_args(argv)
    weights = args.weights
    if args.build_random:
        if not (Path(args.build_random) / "refine" / "sd15" / "unet").exists():
            build_full_size_random_weights(args.build_random)
        weights = args.build_random
    elif args.build_tiny:
        from anonymask.models.anonymizer.refine.tiny import build_tiny_refiner_weights

        build_tiny_refiner_weights(args.build_tiny)
        weights = args.build_tiny
    if args.autocast_check:
        result = bench_autocast_agreement(weights, frames=args.frames, size=args.size,
                                          autocast_dtype=getattr(torch, args.autocast_check),
                                          guidance_scale=args.guidance)
        print(json.dumps(result, indent=2))
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        return
    dtype = getattr(torch, args.dtype) if args.dtype else None
    extra: dict[str, Any] = {}
    if args.stride:
        extra["stride"] = args.stride
    if args.dilations:
        extra["window_dilations"] = tuple(int(d) for d in args.dilations.split(","))
    video = real_crop(args.video, args.frames, args.size) if args.video else None
    if args.static:
        if video is None:
            video = np.random.default_rng(0).integers(0, 256, (args.frames, args.size, args.size, 3), dtype=np.uint8)
        video = np.repeat(video[:1], args.frames, axis=0)
    latents: list[torch.Tensor] = []
    shared = args.static or args.shared_noise
    with frame_shared_noise() if shared else nullcontext(), capture_final_latents(latents, args.seam):
        result = bench_refine(
            weights,
            frames=args.frames,
            size=args.size,
            steps=args.steps,
            device=args.device,
            dtype=dtype,
            repeats=args.repeats,
            guidance_scale=args.guidance,
            strength=args.strength,
            warmup=not args.no_warmup,
            video=video,
            keep_output=args.seam,
            **extra,
        )
    if args.seam:
        from anonymask.models.anonymizer.refine.windows import window_schedule

        out = result.pop("output_array")
        # the schedule of the last step (one step: shift 0); with several steps the borders move
        schedule = window_schedule(out.shape[0], result["window"], result["stride"], result["window_dilations"])
        result["seams"] = seam_report(out, schedule)
        # the denoised latents (1,C,T,h,w) before the VAE decodes them frame by frame, unquantised
        result["seams_latents"] = seam_report(latents[-1][0].transpose(0, 1).float().numpy(), schedule)
        if args.out:
            np.save(Path(args.out).with_suffix(".npy"), out)
    emit(result, args.out)


if __name__ == "__main__":
    main()
