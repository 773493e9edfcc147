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
from pathlib import Path
from typing import Any

import numpy as np
import torch

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


def bench_refine(
    weights_root: str | os.PathLike | None,
    frames: int = 16,
    size: int = 512,
    steps: int = 4,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    repeats: int = 2,
    seed: int = 0,
    **refiner_kwargs: Any,
) -> dict[str, Any]:
    """Time ``repeats`` refinements of a random ``frames`` x ``size`` x ``size`` crop after one warm-up.

    ``strength`` defaults to 1 so every one of ``steps`` denoising steps runs. Returns a JSON-ready
    dict: seconds_per_step (median over all timed steps), seconds_per_call, encode/decode seconds,
    windows per step, peak GPU memory, and what ran where.
    """
    from anonymask.models.anonymizer.refine.animatediff import CONDITION_KEYS, AnimateDiffRefiner

    refiner_kwargs.setdefault("strength", 1.0)
    start = time.perf_counter()
    refiner = AnimateDiffRefiner(weights_root, device=device, dtype=dtype, num_inference_steps=steps, **refiner_kwargs)
    load_seconds = time.perf_counter() - start
    rng = np.random.default_rng(seed)
    video = rng.integers(0, 256, (frames, size, size, 3), dtype=np.uint8)
    conditions = {k: rng.integers(0, 256, (frames, size, size, 3), dtype=np.uint8) for k in CONDITION_KEYS}
    cuda = refiner.device.type == "cuda"
    refiner.refine(video, conditions, seed=seed)  # warm-up: kernels, allocator, text embeddings
    if cuda:
        torch.cuda.reset_peak_memory_stats(refiner.device)
    step_seconds, call_seconds, encode, decode = [], [], [], []
    for i in range(repeats):
        begin = refiner._sync()
        refiner.refine(video, conditions, seed=seed + 1 + i)
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
    }
    if cuda:
        result["peak_memory_gb"] = torch.cuda.max_memory_allocated(refiner.device) / 2**30
    return result


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
    dtype = getattr(torch, args.dtype) if args.dtype else None
    result = bench_refine(
        weights,
        frames=args.frames,
        size=args.size,
        steps=args.steps,
        device=args.device,
        dtype=dtype,
        repeats=args.repeats,
        guidance_scale=args.guidance,
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
