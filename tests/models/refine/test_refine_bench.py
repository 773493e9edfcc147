"""Benchmark harness on tiny weights; full-size architectures checked on the meta device."""

import json

import pytest
import torch

from anonymask.bench import refine as bench


def test_bench_refine_on_tiny_weights(tiny_weights):
    result = bench.bench_refine(tiny_weights, frames=6, size=32, steps=2, device="cpu", repeats=1, guidance_scale=1.0)
    json.dumps(result)  # JSON-ready
    assert result["steps_run"] == 2  # strength 1: every step runs
    assert result["seconds_per_step"] > 0 and result["seconds_per_call"] >= result["seconds_per_step"]
    assert result["frames"] == 6 and result["size"] == 32 and result["device"] == "cpu"
    assert result["windows_per_step"] == 1 and result["guidance"] is False


def test_full_size_configs_are_the_published_architectures():
    """Parameter counts of SD 1.5's UNet (859.52 M), a SD 1.5 ControlNet (361.28 M), the AnimateDiff
    v1.5-2 motion adapter (453.21 M), SD's VAE (83.65 M) and CLIP ViT-L/14's text tower (123.06 M)."""
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()
    from diffusers import AutoencoderKL, ControlNetModel, MotionAdapter, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from anonymask.models.anonymizer.refine.tiny import byte_vocab

    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    with torch.device("meta"):
        unet = UNet2DConditionModel(**bench.sd15_unet_config())
        assert count(unet) == 859_520_964
        assert count(ControlNetModel.from_unet(unet, load_weights_from_unet=False)) == 361_279_120
        assert count(MotionAdapter(**bench.animatediff_v152_adapter_config())) == 453_209_280
        assert count(AutoencoderKL(**bench.sd_vae_config())) == 83_653_863
        config = CLIPTextConfig(**bench.clip_vit_l14_text_config(byte_vocab()))
        assert count(CLIPTextModel(config)) == 123_060_480


@pytest.mark.slow
def test_full_size_random_weights_load_and_run_one_step(tmp_path):
    """Builds ~5 GB of fp16 weights (minutes of CPU); loads them through the real loader."""
    from anonymask.models.anonymizer.refine.weights import missing_refine_files

    root = bench.build_full_size_random_weights(tmp_path)
    assert missing_refine_files(root) == []
    result = bench.bench_refine(root, frames=2, size=64, steps=1, repeats=1, guidance_scale=1.0)
    assert result["steps_run"] == 1
