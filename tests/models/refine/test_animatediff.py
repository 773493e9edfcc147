"""AnimateDiff + ControlNet refiner on tiny random weights loaded through the real loader (CPU)."""

import shutil

import numpy as np
import pytest
import torch

from anonymask.core.errors import MissingWeightsError
from anonymask.models.anonymizer.refine.animatediff import (
    CONDITION_KEYS,
    AnimateDiffRefiner,
    load_refine_pipeline,
)

FAST = dict(num_inference_steps=4, strength=0.5, guidance_scale=3.0)


@pytest.fixture(scope="module")
def refiner(tiny_weights):
    return AnimateDiffRefiner(tiny_weights, device="cpu", **FAST)


@pytest.fixture(scope="module")
def static_motion_weights(tiny_weights, tmp_path_factory):
    """The tiny weights with every motion module's output projection zeroed: frames stop interacting."""
    from diffusers import MotionAdapter

    root = tmp_path_factory.mktemp("static_motion")
    shutil.copytree(tiny_weights / "refine", root / "refine")
    adapter = MotionAdapter.from_pretrained(root / "refine/motion_adapter", local_files_only=True)
    zeroed = 0
    with torch.no_grad():
        for name, param in adapter.named_parameters():
            if ".proj_out." in name:
                param.zero_()
                zeroed += 1
    assert zeroed > 0
    adapter.save_pretrained(root / "refine/motion_adapter")
    return root


def test_output_shape_dtype_and_determinism(refiner, crop_maker):
    frames, conditions = crop_maker(8)
    out = refiner.refine(frames, conditions, seed=7)
    assert out.shape == frames.shape and out.dtype == np.uint8
    assert refiner.last_stats["steps_run"] == 2  # 4 steps at strength 0.5
    assert refiner.last_stats["windows"] == [1, 1]
    assert np.array_equal(out, refiner.refine(frames, conditions, seed=7))
    assert not np.array_equal(out, refiner.refine(frames, conditions, seed=8))


def test_strength_zero_is_identity_and_strength_changes_frames(tiny_weights, refiner, crop_maker):
    frames, conditions = crop_maker(8)
    still = AnimateDiffRefiner(tiny_weights, device="cpu", **(FAST | {"strength": 0.0}))
    assert still.pipe is refiner.pipe  # one pipeline per weights/device/dtype
    assert np.array_equal(still.refine(frames, conditions), frames)
    out = refiner.refine(frames, conditions)
    assert np.abs(out.astype(int) - frames).mean() > 1.0


def test_matches_the_diffusers_pipeline_for_one_window(refiner, crop_maker):
    """Our loop (windows, cached ControlNets) computes what the pipeline's own __call__ computes."""
    from PIL import Image

    frames, conditions = crop_maker(8)
    ours = refiner.refine(frames, conditions, seed=3)
    pil = lambda video: [Image.fromarray(f) for f in video]  # noqa: E731
    ref = refiner.pipe(
        video=pil(frames),
        prompt=refiner.prompt,
        negative_prompt=refiner.negative_prompt,
        height=64,
        width=64,
        num_inference_steps=FAST["num_inference_steps"],
        strength=FAST["strength"],
        guidance_scale=FAST["guidance_scale"],
        generator=torch.Generator("cpu").manual_seed(3),
        conditioning_frames=[pil(conditions[k]) for k in CONDITION_KEYS],
        controlnet_conditioning_scale=refiner.controlnet_scales,
        output_type="np",
    ).frames[0]
    ref = (ref * 255).round().astype(np.uint8)
    diff = np.abs(ref.astype(int) - ours)
    assert diff.max() <= 1 and (diff == 0).mean() > 0.999


def test_every_condition_steers_the_output(refiner, crop_maker):
    frames, conditions = crop_maker(8)
    base = refiner.refine(frames, conditions, seed=1)
    for key in CONDITION_KEYS:
        changed = dict(conditions, **{key: 255 - conditions[key]})
        assert not np.array_equal(base, refiner.refine(frames, changed, seed=1)), key


def test_long_crop_is_windowed_and_every_frame_refined(tiny_weights, crop_maker):
    frames, conditions = crop_maker(21)
    refiner = AnimateDiffRefiner(tiny_weights, device="cpu", window=8, stride=4, window_dilations=(1, 2), **FAST)
    out = refiner.refine(frames, conditions, seed=0)
    assert out.shape == frames.shape
    assert all(n > 1 for n in refiner.last_stats["windows"])
    per_frame_change = np.abs(out.astype(int) - frames).mean(axis=(1, 2, 3))
    assert np.all(per_frame_change > 1.0)  # no frame was left out


def test_windowing_is_exact_when_frames_do_not_interact(static_motion_weights, crop_maker):
    """With motion modules that pass frames through, windowed denoising must equal one big window:
    this pins the per-frame averaging, the condition slicing and the cached ControlNet residuals."""
    frames, conditions = crop_maker(21, seed=2)
    whole = AnimateDiffRefiner(static_motion_weights, device="cpu", window=32, stride=16, **FAST)
    whole_out = whole.refine(frames, conditions, seed=5)
    assert whole.last_stats["windows"] == [1, 1]
    for kwargs in (
        dict(window=8, stride=4, window_dilations=(1, 2), cache_controlnet=True, windows_per_batch=3),
        dict(window=6, stride=5, window_dilations=(1,), cache_controlnet=False, weighting="uniform"),
    ):
        windowed = AnimateDiffRefiner(static_motion_weights, device="cpu", **FAST, **kwargs)
        out = windowed.refine(frames, conditions, seed=5)
        assert min(windowed.last_stats["windows"]) > 2
        assert np.abs(out.astype(int) - whole_out).max() <= 1, kwargs


def test_motion_modules_couple_frames_so_windows_matter(tiny_weights, crop_maker):
    """Control for the test above: with real (random) motion modules the window choice does change
    the result, so that test has the power to fail."""
    frames, conditions = crop_maker(21, seed=2)
    whole = AnimateDiffRefiner(tiny_weights, device="cpu", window=32, stride=16, **FAST).refine(frames, conditions)
    windowed = AnimateDiffRefiner(tiny_weights, device="cpu", window=8, stride=4, **FAST).refine(frames, conditions)
    assert np.abs(whole.astype(int) - windowed).max() > 1


def test_odd_sizes_and_grey_depth(refiner, crop_maker):
    frames, conditions = crop_maker(5, size=60)
    conditions["depth"] = conditions["depth"][..., 0]  # (T,H,W) depth is accepted
    out = refiner.refine(frames, conditions)
    assert out.shape == (5, 60, 60, 3)


def test_bad_inputs_raise(refiner, crop_maker):
    frames, conditions = crop_maker(4)
    with pytest.raises(ValueError, match="face"):
        refiner.refine(frames, {k: v for k, v in conditions.items() if k != "face"})
    with pytest.raises(ValueError, match="uint8"):
        refiner.refine(frames.astype(np.float32), conditions)
    with pytest.raises(ValueError, match="differs"):
        refiner.refine(frames, dict(conditions, pose=conditions["pose"][:3]))


def test_uses_sdpa_attention_and_local_files_only(refiner):
    from diffusers.models.attention_processor import AttnProcessor2_0

    processors = refiner.pipe.unet.attn_processors
    assert processors and all(isinstance(p, AttnProcessor2_0) for p in processors.values())
    assert load_refine_pipeline(refiner.weights, refiner.device, refiner.dtype) is refiner.pipe
    assert refiner.dtype == torch.float32  # CPU runs in fp32


def test_missing_weights_raise_before_loading(tmp_path):
    with pytest.raises(MissingWeightsError) as info:
        AnimateDiffRefiner(tmp_path, device="cpu")
    assert any("controlnet_openpose" in m for m in info.value.missing)
    assert any("motion_adapter" in m for m in info.value.missing)


def test_invalid_settings_raise(tiny_weights):
    with pytest.raises(ValueError):
        AnimateDiffRefiner(tiny_weights, device="cpu", window=40)  # motion modules reach 32 frames
    with pytest.raises(ValueError):
        AnimateDiffRefiner(tiny_weights, device="cpu", controlnet_scales=(1.0, 1.0))
    with pytest.raises(ValueError):
        AnimateDiffRefiner(tiny_weights, device="cpu", stride=20)
    with pytest.raises(ValueError):
        AnimateDiffRefiner(tiny_weights, device="cpu", weighting="gaussian")


def test_get_refiner_caches_instances(tiny_weights):
    from anonymask.models.anonymizer.refine.animatediff import get_refiner

    a = get_refiner(weights_root=tiny_weights, device="cpu", controlnet_scales=[1.0, 1.0, 0.5])
    assert get_refiner(weights_root=tiny_weights, device="cpu", controlnet_scales=(1.0, 1.0, 0.5)) is a
    b = get_refiner(weights_root=tiny_weights, device="cpu", strength=0.3)
    assert b is not a and b.pipe is a.pipe
