"""Where the refinement models' weights live, and one clear error when they are not there.

The "Rend.+Diff" refiner (Stable Diffusion 1.5 + AnimateDiff motion adapter + three ControlNets)
loads only from the local folder named by ``ANONYMASK_WEIGHTS``; nothing is fetched at run time.
The layout under that folder is (every component in diffusers ``save_pretrained`` format)::

    $ANONYMASK_WEIGHTS/refine/
      sd15/                 a diffusers Stable Diffusion 1.5 folder
        unet/               config.json + diffusion_pytorch_model.safetensors
        vae/                config.json + diffusion_pytorch_model.safetensors
        text_encoder/       config.json + model.safetensors
        tokenizer/          tokenizer.json, or vocab.json + merges.txt (+ tokenizer_config.json)
        scheduler/          scheduler_config.json
        (model_index.json, safety_checker/, feature_extractor/ may be there; they are not read)
      motion_adapter/       config.json + diffusion_pytorch_model.safetensors
      controlnet_depth/     config.json + diffusion_pytorch_model.safetensors
      controlnet_openpose/  config.json + diffusion_pytorch_model.safetensors
      controlnet_face/      config.json + diffusion_pytorch_model.safetensors

``.bin`` weights and sharded ``*.index.json`` weights are accepted wherever ``.safetensors`` is.
Where users get them: see :data:`SOURCES` and :func:`download_instructions`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from anonymask.core.errors import MissingWeightsError

ENV_VAR = "ANONYMASK_WEIGHTS"
SUBDIR = "refine"
MODEL_NAME = "refine (Stable Diffusion 1.5 + AnimateDiff + ControlNets)"

# Folder under refine/ -> (hub repository, subfolder in it or "") users download it from.
SOURCES: dict[str, tuple[str, str]] = {
    "sd15": ("stable-diffusion-v1-5/stable-diffusion-v1-5", ""),  # formerly runwayml/stable-diffusion-v1-5
    "motion_adapter": ("guoyww/animatediff-motion-adapter-v1-5-2", ""),
    "controlnet_depth": ("lllyasviel/control_v11f1p_sd15_depth", ""),
    "controlnet_openpose": ("lllyasviel/control_v11p_sd15_openpose", ""),
    "controlnet_face": ("CrucibleAI/ControlNetMediaPipeFace", "diffusion_sd15"),
}

# The ControlNet folders in the order the refiner applies them (and the condition keys they take).
CONTROLNET_FOLDERS: dict[str, str] = {
    "depth": "controlnet_depth",
    "pose": "controlnet_openpose",
    "face": "controlnet_face",
}

_DIFFUSERS_WEIGHTS = (
    "diffusion_pytorch_model.safetensors",
    "diffusion_pytorch_model.bin",
    "diffusion_pytorch_model.safetensors.index.json",
    "diffusion_pytorch_model.bin.index.json",
)
_TRANSFORMERS_WEIGHTS = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)

# Relative folder -> list of requirements; a requirement is satisfied by any one of its alternatives,
# and an alternative "a+b" needs every one of the files a and b.
REQUIRED: dict[str, list[tuple[str, ...]]] = {
    "sd15/unet": [("config.json",), _DIFFUSERS_WEIGHTS],
    "sd15/vae": [("config.json",), _DIFFUSERS_WEIGHTS],
    "sd15/text_encoder": [("config.json",), _TRANSFORMERS_WEIGHTS],
    # transformers < 5 saves vocab.json + merges.txt (as the hub has them), transformers 5 tokenizer.json.
    "sd15/tokenizer": [("tokenizer.json", "vocab.json+merges.txt")],
    "sd15/scheduler": [("scheduler_config.json",)],
    "motion_adapter": [("config.json",), _DIFFUSERS_WEIGHTS],
    **{folder: [("config.json",), _DIFFUSERS_WEIGHTS] for folder in CONTROLNET_FOLDERS.values()},
}


@dataclass(frozen=True)
class RefineWeights:
    """Resolved, checked paths of every refinement component."""

    root: Path  # the refine/ folder
    sd15: Path
    motion_adapter: Path
    controlnets: dict[str, Path]  # condition key ("depth", "pose", "face") -> ControlNet folder

    def key(self) -> str:
        """A string that identifies this weight set (cache key for loaded models)."""
        return str(self.root.resolve())


def weights_root(root: str | os.PathLike | None = None) -> Path:
    """The folder that holds every model's weights: ``root`` or else ``$ANONYMASK_WEIGHTS``."""
    if root is None:
        from anonymask.core.paths import weights_root as from_env

        root = from_env()
    if not root:
        raise MissingWeightsError(
            MODEL_NAME,
            [f"{ENV_VAR} is not set, so no {SUBDIR}/ folder can be found"],
            hint=_hint(None),
        )
    return Path(root).expanduser()


def missing_refine_files(root: str | os.PathLike) -> list[str]:
    """Every required file under ``root/refine`` that is absent, as paths relative to ``root``."""
    base = Path(root) / SUBDIR
    missing = []
    for folder, requirements in REQUIRED.items():
        for alternatives in requirements:
            if not any(_present(base / folder, alternative) for alternative in alternatives):
                shown = f"{SUBDIR}/{folder}/{alternatives[0]}"
                if len(alternatives) > 1:
                    shown += " (or " + ", ".join(alternatives[1:]) + ")"
                missing.append(shown)
    return missing


def _present(folder: Path, alternative: str) -> bool:
    return all((folder / name).is_file() for name in alternative.split("+"))


def check_refine_settings(settings: dict) -> None:
    """The registry's weight check for ``refine.backend=animatediff`` (its ``weights_root`` setting)."""
    resolve_refine_weights(settings.get("weights_root"))


def resolve_refine_weights(root: str | os.PathLike | None = None) -> RefineWeights:
    """Check the refine/ layout under ``root`` (default ``$ANONYMASK_WEIGHTS``) and return its paths.

    Raises MissingWeightsError listing every missing file, and where to get it, in one message.
    """
    top = weights_root(root)
    missing = missing_refine_files(top)
    if missing:
        raise MissingWeightsError(MODEL_NAME, missing, hint=_hint(top))
    base = top / SUBDIR
    return RefineWeights(
        root=base,
        sd15=base / "sd15",
        motion_adapter=base / "motion_adapter",
        controlnets={key: base / folder for key, folder in CONTROLNET_FOLDERS.items()},
    )


def _hint(top: Path | None) -> str:
    where = f"{top / SUBDIR}" if top is not None else f"${ENV_VAR}/{SUBDIR}"
    sources = "; ".join(
        f"{folder}/ <- {repo}" + (f" (subfolder {sub})" if sub else "") for folder, (repo, sub) in SOURCES.items()
    )
    return (
        f"get them on a machine with internet from the Hugging Face hub: {sources}; save each with diffusers' "
        f"save_pretrained under {where}/ (recipe: anonymask.models.anonymizer.refine.weights.download_instructions(), "
        "docs/WEIGHTS.md)"
    )


def download_instructions(target: str = f"${ENV_VAR}/{SUBDIR}") -> str:
    """A script users run ONCE on a machine with internet to fill ``target`` (the refine/ folder).

    Kept here (not run by the project) so the error message, the docs and the code agree.
    """
    return f"""\
# pip install diffusers transformers huggingface_hub safetensors torch
import torch
from diffusers import ControlNetModel, MotionAdapter, StableDiffusionPipeline

target = "{target}"
kw = dict(torch_dtype=torch.float16)  # halves the download; the refiner casts as it needs
StableDiffusionPipeline.from_pretrained(
    "{SOURCES['sd15'][0]}", variant="fp16", safety_checker=None, **kw
).save_pretrained(f"{{target}}/sd15")
MotionAdapter.from_pretrained("{SOURCES['motion_adapter'][0]}", **kw).save_pretrained(
    f"{{target}}/motion_adapter")
ControlNetModel.from_pretrained("{SOURCES['controlnet_depth'][0]}", **kw).save_pretrained(
    f"{{target}}/controlnet_depth")
ControlNetModel.from_pretrained("{SOURCES['controlnet_openpose'][0]}", **kw).save_pretrained(
    f"{{target}}/controlnet_openpose")
ControlNetModel.from_pretrained(
    "{SOURCES['controlnet_face'][0]}", subfolder="{SOURCES['controlnet_face'][1]}", **kw
).save_pretrained(f"{{target}}/controlnet_face")
"""
