"""The "Rend.+Diff" refiner: AnimateDiff video-to-video with depth, pose and face ControlNets.

A rendered avatar crop is encoded, partly noised (``strength``) and denoised again by Stable
Diffusion 1.5 with the AnimateDiff motion adapter, guided by three ControlNets (depth, OpenPose,
MediaPipe face) computed from the render, so the avatar looks real while keeping its exact pose.

Components come from diffusers' ``AnimateDiffVideoToVideoControlNetPipeline`` (a list of
ControlNets becomes a MultiControlNet), loaded once per process from the local weights folder
(:mod:`anonymask.models.anonymizer.refine.weights`). The denoising loop is ours: it calls the pipeline's own
prompt encoding, ControlNets, motion UNet and scheduler, but splits crops longer than the motion
module's window into temporal windows at every step and averages the per-frame noise predictions
(:mod:`anonymask.models.anonymizer.refine.windows`). For a crop of at most ``window`` frames it computes what
the pipeline's ``__call__`` computes (a test pins this).
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import numpy as np
import torch
from pydantic import Field

from anonymask.core.compat import ensure_torchvision
from anonymask.models.anonymizer.refine.weights import RefineWeights, resolve_refine_weights
from anonymask.models.anonymizer.refine.windows import (
    WEIGHTINGS,
    WindowAccumulator,
    rolling_shift,
    window_schedule,
)

CONDITION_KEYS = ("depth", "pose", "face")  # ControlNet order: depth, OpenPose, MediaPipe face

# AnimateDiff's motion modules were trained with a linear beta schedule; DDIM with these settings is
# what the motion adapter's authors and diffusers' AnimateDiff examples use.
ANIMATEDIFF_SCHEDULER = {
    "beta_schedule": "linear",
    "clip_sample": False,
    "timestep_spacing": "linspace",
    "steps_offset": 1,
}

DEFAULT_PROMPT = "a realistic photo of a person, natural skin, natural clothes, detailed"
DEFAULT_NEGATIVE_PROMPT = "cartoon, 3d render, cgi, plastic, blurry, deformed, disfigured, low quality"

_PIPELINES: dict[tuple[str, str, str], Any] = {}
_RUN_LOCKS: dict[int, threading.Lock] = {}  # id(pipeline) -> lock: its scheduler holds per-run state
_PIPELINES_LOCK = threading.Lock()
_REFINERS: dict[tuple, AnimateDiffRefiner] = {}


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    """fp16 on CUDA (SD 1.5's native precision), fp32 on CPU (half precision is slow there)."""
    return torch.float16 if torch.device(device).type == "cuda" else torch.float32


def load_refine_pipeline(weights: RefineWeights, device: torch.device, dtype: torch.dtype):
    """The pipeline for ``weights`` on ``device``/``dtype``: built on first use, then shared.

    Every ``from_pretrained`` reads the local folder only (``local_files_only=True``).
    """
    key = (weights.key(), str(device), str(dtype))
    with _PIPELINES_LOCK:
        if key not in _PIPELINES:
            pipe = _build_pipeline(weights, torch.device(device), dtype)
            _PIPELINES[key] = pipe
        return _PIPELINES[key]


def _run_lock(pipe) -> threading.Lock:
    with _PIPELINES_LOCK:
        return _RUN_LOCKS.setdefault(id(pipe), threading.Lock())


def clear_pipeline_cache() -> None:
    """Forget loaded pipelines and refiners (tests; freeing GPU memory)."""
    with _PIPELINES_LOCK:
        _PIPELINES.clear()
        _RUN_LOCKS.clear()
        _REFINERS.clear()


def get_refiner(**kwargs: Any) -> AnimateDiffRefiner:
    """One :class:`AnimateDiffRefiner` per distinct configuration per process (for task code).

    ``kwargs`` are the constructor's (compared by their repr; lists as tuples).
    """
    key = tuple(sorted((k, repr(tuple(v) if isinstance(v, list) else v)) for k, v in kwargs.items()))
    refiner = _REFINERS.get(key)
    if refiner is None:
        refiner = AnimateDiffRefiner(**kwargs)
        with _PIPELINES_LOCK:
            refiner = _REFINERS.setdefault(key, refiner)
    return refiner


def _build_pipeline(weights: RefineWeights, device: torch.device, dtype: torch.dtype):
    ensure_torchvision()
    from diffusers import (
        AnimateDiffVideoToVideoControlNetPipeline,
        AutoencoderKL,
        ControlNetModel,
        DDIMScheduler,
        MotionAdapter,
        UNet2DConditionModel,
        UNetMotionModel,
    )
    from transformers import CLIPTextModel, CLIPTokenizer

    local = {"local_files_only": True}
    models = dict(local)  # for diffusers models
    if importlib.util.find_spec("accelerate") is None:  # avoids one warning per model
        models["low_cpu_mem_usage"] = False
    sd = weights.sd15
    unet2d = UNet2DConditionModel.from_pretrained(sd, subfolder="unet", torch_dtype=dtype, **models)
    adapter = MotionAdapter.from_pretrained(weights.motion_adapter, torch_dtype=dtype, **models)
    unet = UNetMotionModel.from_unet2d(unet2d, adapter).to(device).eval()  # built in fp32
    if dtype != torch.float32:
        unet = unet.to(dtype)
    del unet2d, adapter
    controlnets = [
        ControlNetModel.from_pretrained(weights.controlnets[k], torch_dtype=dtype, **models).to(device)
        for k in CONDITION_KEYS
    ]
    vae = AutoencoderKL.from_pretrained(sd, subfolder="vae", **models)
    # The SD VAE overflows in fp16 (diffusers marks it force_upcast): keep it in fp32.
    vae_dtype = torch.float32 if getattr(vae.config, "force_upcast", True) else dtype
    vae = vae.to(device)
    if vae.dtype != vae_dtype:
        vae = vae.to(vae_dtype)
    text_encoder = CLIPTextModel.from_pretrained(sd / "text_encoder", dtype=dtype, **local).to(device)
    tokenizer = CLIPTokenizer.from_pretrained(sd / "tokenizer", **local)
    max_tokens = text_encoder.config.max_position_embeddings
    if tokenizer.model_max_length > max_tokens:  # folder without tokenizer_config.json
        tokenizer.model_max_length = max_tokens
    scheduler = DDIMScheduler.from_pretrained(sd, subfolder="scheduler", **ANIMATEDIFF_SCHEDULER, **local)
    pipe = AnimateDiffVideoToVideoControlNetPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        motion_adapter=None,  # already merged into the UNetMotionModel
        controlnet=controlnets,
        scheduler=scheduler,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _as_uint8_video(name: str, array: np.ndarray, shape: tuple[int, int, int] | None) -> np.ndarray:
    array = np.asarray(array)
    if array.ndim == 3:  # (T, H, W) single-channel condition, e.g. depth
        array = np.repeat(array[..., None], 3, axis=-1)
    if array.ndim != 4 or array.shape[-1] != 3 or array.dtype != np.uint8:
        raise ValueError(f"{name}: expected (T,H,W,3) uint8, got {array.shape} {array.dtype}")
    if shape is not None and array.shape[:3] != shape:
        raise ValueError(f"{name}: shape {array.shape[:3]} differs from the frames' {shape}")
    return array


def _pad_to_multiple(array: np.ndarray, multiple: int) -> np.ndarray:
    """Edge-pad (T,H,W,C) so H and W are multiples of ``multiple`` (the VAE's downsampling)."""
    pad_h = -array.shape[1] % multiple
    pad_w = -array.shape[2] % multiple
    if pad_h == 0 and pad_w == 0:
        return array
    return np.pad(array, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")


def _batches(schedule: Sequence[Sequence[int]], size: int) -> list[list[list[int]]]:
    """Group windows of equal length, ``size`` at most per group (one UNet call per group)."""
    by_length: dict[int, list[list[int]]] = {}
    for frames in schedule:
        by_length.setdefault(len(frames), []).append(list(frames))
    groups = []
    for windows in by_length.values():
        groups += [windows[i : i + size] for i in range(0, len(windows), size)]
    return groups


class AnimateDiffRefiner:
    """Refines rendered avatar crops with AnimateDiff + depth/pose/face ControlNets.

    Weights load once per process (shared by every refiner on the same folder, device and dtype).
    Crops longer than ``window`` frames are denoised in temporal windows at every step (see
    :mod:`anonymask.models.anonymizer.refine.windows`): contiguous windows ``stride`` apart, plus strided
    frame subsets for each dilation in ``window_dilations`` beyond 1, with window borders shifted
    from step to step.
    """

    def __init__(
        self,
        weights_root: str | os.PathLike | None = None,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        num_inference_steps: Annotated[int, Field(ge=1)] = 25,
        strength: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
        guidance_scale: float = 7.5,
        controlnet_scales: Sequence[float] = (0.75, 1.0, 0.6),
        window: Annotated[int, Field(ge=1)] = 16,
        stride: Annotated[int, Field(ge=1)] = 8,
        window_dilations: Sequence[int] = (1, 2),
        weighting: str = "pyramid",
        windows_per_batch: Annotated[int, Field(ge=1)] = 1,
        cache_controlnet: bool = True,
        prompt: str = DEFAULT_PROMPT,
        negative_prompt: str = DEFAULT_NEGATIVE_PROMPT,
        decode_chunk_size: Annotated[int, Field(ge=1)] = 16,
        eta: float = 0.0,
    ):
        self.weights = resolve_refine_weights(weights_root)  # fails fast, before any model loads
        if len(controlnet_scales) != len(CONDITION_KEYS):
            raise ValueError(f"controlnet_scales needs {len(CONDITION_KEYS)} values {CONDITION_KEYS}")
        if not 0.0 <= strength <= 1.0:
            raise ValueError(f"strength must be in [0, 1], got {strength}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
        window_schedule(window + 1, window, stride, window_dilations)  # validates the window settings
        self.device = torch.device(device) if device is not None else default_device()
        self.dtype = dtype or default_dtype(self.device)
        self.num_inference_steps = int(num_inference_steps)
        self.strength = float(strength)
        self.guidance_scale = float(guidance_scale)
        self.controlnet_scales = [float(s) for s in controlnet_scales]
        self.window, self.stride = int(window), int(stride)
        self.window_dilations = tuple(int(d) for d in window_dilations)
        self.weighting = weighting
        self.windows_per_batch = max(1, int(windows_per_batch))
        self.cache_controlnet = bool(cache_controlnet)
        self.prompt, self.negative_prompt = prompt, negative_prompt
        self.decode_chunk_size = int(decode_chunk_size)
        self.eta = float(eta)
        self.pipe = load_refine_pipeline(self.weights, self.device, self.dtype)
        self._run_lock = _run_lock(self.pipe)
        max_frames = self.pipe.unet.config.motion_max_seq_length
        if self.window > max_frames:
            raise ValueError(f"window {self.window} exceeds the motion module's {max_frames} frames")
        self._text: dict[tuple[str, str, bool], torch.Tensor] = {}
        self.last_stats: dict[str, Any] = {}

    # -- public -------------------------------------------------------------------------------

    def refine(self, frames: np.ndarray, conditions: Mapping[str, np.ndarray], seed: int = 0) -> np.ndarray:
        """Refine a crop: ``frames`` (T,S,S,3) uint8 and conditions {"depth","pose","face"} of the
        same shape (depth may be (T,S,S)) -> (T,S,S,3) uint8. Same seed, same output.

        ``strength`` 0 (or too few steps to run one) returns the frames unchanged.
        """
        frames = _as_uint8_video("frames", frames, None)
        missing = [k for k in CONDITION_KEYS if k not in conditions]
        if missing:
            raise ValueError(f"conditions lack {missing}; need {list(CONDITION_KEYS)}")
        conds = [_as_uint8_video(f"conditions[{k!r}]", conditions[k], frames.shape[:3]) for k in CONDITION_KEYS]
        with self._run_lock, torch.inference_mode():
            return self._refine(frames, conds, seed)

    # -- internals ----------------------------------------------------------------------------

    def _sync(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def _refine(self, frames: np.ndarray, conds: list[np.ndarray], seed: int) -> np.ndarray:
        pipe, sched = self.pipe, self.pipe.scheduler
        num_frames, height, width = frames.shape[:3]
        sched.set_timesteps(self.num_inference_steps, device=self.device)
        timesteps, _ = pipe.get_timesteps(self.num_inference_steps, sched.timesteps, self.strength, self.device)
        self.last_stats = {"frames": num_frames, "steps_run": len(timesteps), "step_seconds": [], "windows": []}
        if len(timesteps) == 0:
            return frames.copy()
        factor = pipe.vae_scale_factor
        video = torch.from_numpy(_pad_to_multiple(frames, factor)).to(self.device)
        video = video.permute(0, 3, 1, 2).to(pipe.vae.dtype) / 127.5 - 1.0  # (T,3,H,W) in [-1,1]
        cond_images = [
            torch.from_numpy(_pad_to_multiple(c, factor)).to(self.device).permute(0, 3, 1, 2).to(self.dtype) / 255.0
            for c in conds
        ]
        generator = torch.Generator("cpu").manual_seed(int(seed))
        start = self._sync()
        text = self._text_embeddings()
        latents = self._encode(video, timesteps[:1], generator)
        self.last_stats["encode_seconds"] = self._sync() - start
        extra = pipe.prepare_extra_step_kwargs(generator, self.eta)
        for i, t in enumerate(timesteps):
            start = self._sync()
            schedule = window_schedule(
                num_frames, self.window, self.stride, self.window_dilations, rolling_shift(i, self.stride)
            )
            noise = self._noise_prediction(latents, t, schedule, text, cond_images)
            latents = sched.step(noise, t, latents, **extra).prev_sample
            self.last_stats["step_seconds"].append(self._sync() - start)
            self.last_stats["windows"].append(len(schedule))
        start = self._sync()
        out = self._decode(latents)[:, :height, :width]
        self.last_stats["decode_seconds"] = self._sync() - start
        return out

    def _text_embeddings(self) -> torch.Tensor:
        """(1 or 2, tokens, dim): [negative, positive] with classifier-free guidance, else [positive]."""
        cfg = self.guidance_scale > 1.0
        key = (self.prompt, self.negative_prompt, cfg)
        if key not in self._text:
            positive, negative = self.pipe.encode_prompt(
                self.prompt, self.device, 1, cfg, self.negative_prompt if cfg else None
            )
            self._text[key] = torch.cat([negative, positive]) if cfg else positive
        return self._text[key]

    def _encode(self, video: torch.Tensor, t0: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """VAE-encode (T,3,H,W) and noise to ``t0``: (1,C,T,h,w), drawing randomness as the pipeline does."""
        from diffusers.utils.torch_utils import randn_tensor

        vae = self.pipe.vae
        parts = [
            vae.encode(video[i : i + self.decode_chunk_size]).latent_dist.sample(generator)
            for i in range(0, video.shape[0], self.decode_chunk_size)
        ]
        init = (torch.cat(parts).to(self.dtype) * vae.config.scaling_factor).unsqueeze(0)  # (1,T,C,h,w)
        noise = randn_tensor(init.shape, generator=generator, device=self.device, dtype=self.dtype)
        return self.pipe.scheduler.add_noise(init, noise, t0.repeat(1)).permute(0, 2, 1, 3, 4)

    def _decode(self, latents: torch.Tensor) -> np.ndarray:
        video = self.pipe.decode_latents(latents.to(self.pipe.vae.dtype), self.decode_chunk_size)  # (1,3,T,H,W)
        video = (video[0].permute(1, 2, 3, 0).float() / 2 + 0.5).clamp(0, 1)
        return (video * 255).round().to(torch.uint8).cpu().numpy()

    def _noise_prediction(self, latents, t, schedule, text, cond_images) -> torch.Tensor:
        """The guided noise prediction for all frames, averaged over the windows of ``schedule``."""
        num_frames = latents.shape[2]
        scaled = self.pipe.scheduler.scale_model_input(latents, t)
        if len(schedule) == 1 and len(schedule[0]) == num_frames:
            return self._predict_windows(scaled, t, [list(range(num_frames))], text, cond_images, None)[0]
        residuals = self._controlnet_all_frames(scaled, t, text, cond_images) if self.cache_controlnet else None
        acc = WindowAccumulator(num_frames, frame_dim=2, weighting=self.weighting)
        for windows in _batches(schedule, self.windows_per_batch):
            for frames, pred in zip(windows, self._predict_windows(scaled, t, windows, text, cond_images, residuals)):
                acc.add(frames, pred)
        return acc.result(dtype=latents.dtype)

    def _controlnet(self, frame_latents, t, text, images):
        """ControlNet residuals for (n,C,h,w) frame latents, guidance groups stacked: rows g*n + f."""
        groups, n = text.shape[0], frame_latents.shape[0]
        return self.pipe.controlnet(
            frame_latents.repeat(groups, 1, 1, 1),
            t,
            encoder_hidden_states=text.repeat_interleave(n, dim=0),
            controlnet_cond=[img.repeat(groups, 1, 1, 1) for img in images],
            conditioning_scale=self.controlnet_scales,
            guess_mode=False,
            return_dict=False,
        )

    def _controlnet_all_frames(self, scaled, t, text, cond_images):
        """Residuals of every frame for this step, rows g*T + f (ControlNets see frames one by one,
        so a frame's residuals are the same in every window: compute them once)."""
        frame_latents = scaled[0].transpose(0, 1)  # (T,C,h,w)
        num_frames, groups = frame_latents.shape[0], text.shape[0]
        chunk = self.window * self.windows_per_batch
        downs: list[list[torch.Tensor]] = []
        mids: list[torch.Tensor] = []
        for s in range(0, num_frames, chunk):
            down, mid = self._controlnet(frame_latents[s : s + chunk], t, text, [c[s : s + chunk] for c in cond_images])
            n = min(chunk, num_frames - s)
            downs.append([d.unflatten(0, (groups, n)) for d in down])
            mids.append(mid.unflatten(0, (groups, n)))
        down = [torch.cat([part[i] for part in downs], dim=1).flatten(0, 1) for i in range(len(downs[0]))]
        return down, torch.cat(mids, dim=1).flatten(0, 1)

    def _predict_windows(self, scaled, t, windows, text, cond_images, residuals) -> list[torch.Tensor]:
        """Guided noise predictions for equally long windows, one (1,C,n,h,w) tensor per window."""
        pipe = self.pipe
        groups, k, n = text.shape[0], len(windows), len(windows[0])
        num_frames = scaled.shape[2]
        index = torch.tensor(windows, device=scaled.device).flatten()  # window-major, k*n frames
        window_latents = scaled[0][:, index].unflatten(1, (k, n)).transpose(0, 1)  # (k,C,n,h,w)
        model_input = window_latents.repeat(groups, 1, 1, 1, 1)  # rows: guidance group, then window
        embeds = text.repeat_interleave(k * n, dim=0)
        if residuals is None:
            frame_latents = window_latents.transpose(1, 2).flatten(0, 1)  # (k*n,C,h,w)
            down, mid = self._controlnet(frame_latents, t, text, [c[index] for c in cond_images])
        else:
            rows = torch.cat([g * num_frames + index for g in range(groups)])
            down, mid = [d[rows] for d in residuals[0]], residuals[1][rows]
        noise = pipe.unet(
            model_input,
            t,
            encoder_hidden_states=embeds,
            down_block_additional_residuals=down,
            mid_block_additional_residual=mid,
        ).sample  # (groups*k, C, n, h, w)
        if groups == 2:
            uncond, cond = noise.chunk(2)
            noise = uncond + self.guidance_scale * (cond - uncond)
        return [noise[j : j + 1] for j in range(k)]
