"""Tiny random refinement weights, written in exactly the layout real weights take.

Tests and benchmarks call :func:`build_tiny_refiner_weights` and then load the result through the
real loader (:mod:`anonymask.models.anonymizer.refine.animatediff`), so the loading code path real weights
take is the one that is tested. Nothing is downloaded: every component is built from a config
written here, and the tokenizer from a byte-level vocabulary written here.

ControlNets start with zero output convolutions (that is how they are initialised for training);
random weights would then make the conditions irrelevant, so :func:`randomize_zero_parameters`
gives every all-zero tensor small random values: every component then affects the output.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from anonymask.core.compat import ensure_torchvision
from anonymask.models.anonymizer.refine.weights import CONTROLNET_FOLDERS, SUBDIR

BOS, EOS = "<|startoftext|>", "<|endoftext|>"
TOKENIZER_MAX_LENGTH = 77


def _byte_symbols() -> list[str]:
    """One printable character per byte value, the byte-level BPE convention CLIP's tokenizer uses."""
    kept = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    symbols, shifted = [], 0
    for byte in range(256):
        if byte in kept:
            symbols.append(chr(byte))
        else:
            symbols.append(chr(256 + shifted))
            shifted += 1
    return symbols


def byte_vocab() -> dict[str, int]:
    """A merge-free CLIP vocabulary: every byte, every byte ending a word, then BOS and EOS (514 ids)."""
    symbols = _byte_symbols()
    tokens = symbols + [s + "</w>" for s in symbols] + [BOS, EOS]
    return {token: i for i, token in enumerate(tokens)}


def write_tokenizer(folder: str | os.PathLike) -> dict[str, int]:
    """Write a CLIP tokenizer folder (vocab.json, merges.txt, configs) as the hub ships SD 1.5's."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = byte_vocab()
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    special = {"bos_token": BOS, "eos_token": EOS, "unk_token": EOS, "pad_token": EOS}
    (folder / "special_tokens_map.json").write_text(json.dumps(special))
    config = {"tokenizer_class": "CLIPTokenizer", "model_max_length": TOKENIZER_MAX_LENGTH, **special}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return vocab


def randomize_zero_parameters(module: torch.nn.Module, std: float = 0.05, seed: int = 0) -> int:
    """Give every all-zero parameter tensor N(0, std^2) values; returns how many tensors changed."""
    generator = torch.Generator().manual_seed(seed)
    changed = 0
    with torch.no_grad():
        for param in module.parameters():
            if param.numel() and not torch.any(param):
                # drawn on the CPU (the generator's device) even inside a `with torch.device(...)` block
                noise = torch.randn(param.shape, generator=generator, dtype=torch.float32, device="cpu") * std
                param.copy_(noise.to(param.dtype))
                changed += 1
    return changed


def sd15_scheduler_config() -> dict:
    """The noise schedule of Stable Diffusion 1.5 (PNDM, as its scheduler folder on the hub holds)."""
    return {
        "beta_start": 0.00085,
        "beta_end": 0.012,
        "beta_schedule": "scaled_linear",
        "num_train_timesteps": 1000,
        "set_alpha_to_one": False,
        "skip_prk_steps": True,
        "steps_offset": 1,
        "prediction_type": "epsilon",
        "timestep_spacing": "leading",
    }


def save_refiner_folder(
    root: str | os.PathLike,
    *,
    unet,
    motion_adapter,
    controlnets: dict,
    vae,
    text_encoder,
    scheduler,
) -> Path:
    """Save components under ``root/refine/`` in the layout :func:`resolve_refine_weights` checks."""
    base = Path(root) / SUBDIR
    sd = base / "sd15"
    unet.save_pretrained(sd / "unet")
    vae.save_pretrained(sd / "vae")
    text_encoder.save_pretrained(sd / "text_encoder")
    write_tokenizer(sd / "tokenizer")
    scheduler.save_pretrained(sd / "scheduler")
    index = {
        "_class_name": "StableDiffusionPipeline",
        "unet": ["diffusers", "UNet2DConditionModel"],
        "vae": ["diffusers", "AutoencoderKL"],
        "text_encoder": ["transformers", "CLIPTextModel"],
        "tokenizer": ["transformers", "CLIPTokenizer"],
        "scheduler": ["diffusers", type(scheduler).__name__],
        "safety_checker": [None, None],
        "feature_extractor": [None, None],
        "requires_safety_checker": False,
    }
    (sd / "model_index.json").write_text(json.dumps(index, indent=2))
    motion_adapter.save_pretrained(base / "motion_adapter")
    for key, folder in CONTROLNET_FOLDERS.items():
        controlnets[key].save_pretrained(base / folder)
    return Path(root)


def tiny_unet_config() -> dict:
    """A two-level SD-style UNet small enough for CPU tests (cross-attention width 32)."""
    return {
        "sample_size": 8,
        "in_channels": 4,
        "out_channels": 4,
        "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
        "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
        "block_out_channels": [32, 64],
        "layers_per_block": 1,
        "cross_attention_dim": 32,
        "attention_head_dim": 8,
        "norm_num_groups": 32,
    }


def build_tiny_refiner_weights(folder: str | os.PathLike, seed: int = 0) -> Path:
    """Build tiny random SD + motion adapter + 3 ControlNets and save them as ``folder/refine/...``.

    Returns ``folder``: pass it as ``weights_root`` (or set ANONYMASK_WEIGHTS to it).
    """
    ensure_torchvision()
    from diffusers import AutoencoderKL, ControlNetModel, MotionAdapter, PNDMScheduler, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        unet = UNet2DConditionModel(**tiny_unet_config())
        adapter = MotionAdapter(
            block_out_channels=(32, 64),
            motion_layers_per_block=1,
            motion_num_attention_heads=2,
            motion_norm_num_groups=32,
            motion_max_seq_length=32,
            use_motion_mid_block=True,
        )
        controlnets = {}
        for i, key in enumerate(CONTROLNET_FOLDERS):
            net = ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=(8, 16, 16, 16))
            randomize_zero_parameters(net, seed=seed + 1 + i)
            controlnets[key] = net
        vae = AutoencoderKL(
            in_channels=3,
            out_channels=3,
            down_block_types=["DownEncoderBlock2D"] * 4,
            up_block_types=["UpDecoderBlock2D"] * 4,
            block_out_channels=[8, 16, 16, 16],
            layers_per_block=1,
            latent_channels=4,
            norm_num_groups=8,
            sample_size=64,
        )
        vocab = byte_vocab()
        text_encoder = CLIPTextModel(
            CLIPTextConfig(
                vocab_size=len(vocab),
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                max_position_embeddings=TOKENIZER_MAX_LENGTH,
                projection_dim=32,
                bos_token_id=vocab[BOS],
                eos_token_id=vocab[EOS],
                pad_token_id=vocab[EOS],
            )
        )
        for module in (unet, adapter, vae, text_encoder):
            randomize_zero_parameters(module, seed=seed)
    return save_refiner_folder(
        folder,
        unet=unet,
        motion_adapter=adapter,
        controlnets=controlnets,
        vae=vae,
        text_encoder=text_encoder,
        scheduler=PNDMScheduler(**sd15_scheduler_config()),
    )
