"""TinyViT backbone + SimCC head: the 2-D pose model of Sivangi et al.

SimCC (coordinate classification) predicts, per keypoint, two 1-D distributions: one over
``W * split_ratio`` bins along x and one over ``H * split_ratio`` bins along y. A bin is
``1 / split_ratio`` input pixels wide, so sub-pixel accuracy comes without heatmap upsampling, and
the head is a few small Linear layers: cheap to clip per sample under DP.

Coordinates everywhere in this package are input-image pixels in the pixel-centre convention
(pixel ``i`` is centred on coordinate ``i``); bin ``j`` stands for coordinate ``j / split_ratio``.

Targets are Gaussian-smoothed one-hot labels (a normalised Gaussian over bins centred on the
exact sub-bin position, ``sigma`` in bins) and the loss is KL(target || softmax(logits)), summed
over x and y, weighted by visibility and averaged over keypoints: one value per sample, as the
privacy module's per-sample gradients need.

BatchNorm layers (TinyViT's convolutional stem and MBConv blocks) always run with frozen running
statistics (``PoseModel.train`` keeps them in eval mode): per-sample gradients (vmap) require that
no sample's output depends on the others in its batch, and using the same rule in every mode keeps
non-private and private runs comparable. Every other module trains normally (TinyViT's attention
caches its bias table in eval mode, which would cut the gradient of the functional calls).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from anonymask.core.errors import MissingWeightsError

#: the backbone file looked up under $ANONYMASK_WEIGHTS (a timm state dict of tiny_vit_5m_224)
WEIGHTS_FILE = "hpe/tiny_vit_5m_224.pth"
WEIGHTS_HINT = "put timm's tiny_vit_5m_224 state dict (ImageNet) at $ANONYMASK_WEIGHTS/hpe/tiny_vit_5m_224.pth"

#: ImageNet normalisation the TinyViT weights expect (applied by the data pipeline).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class PoseModelConfig:
    """Architecture of a pose model. ``backbone``: "tiny_vit_5m_224" (the paper's) or "tiny" (a
    four-stage TinyViT with a few thousand times fewer FLOPs, for CPU tests)."""

    backbone: str = "tiny_vit_5m_224"
    input_size: tuple[int, int] = (256, 192)  # (H, W), each a multiple of 32
    num_keypoints: int = 16
    split_ratio: float = 2.0
    sigma: float = 4.0  # label smoothing, in bins
    hidden: int = 256  # width of the SimCC head's shared layer
    tiny_dims: tuple[int, ...] = field(default=(16, 32, 32, 64))

    def __post_init__(self) -> None:
        h, w = self.input_size
        if h <= 0 or w <= 0 or h % 32 or w % 32:
            raise ValueError(f"input size (H, W) must be positive multiples of 32 (TinyViT's stride), got {self.input_size}")
        if self.backbone not in BACKBONES:
            raise ValueError(f"unknown backbone {self.backbone!r}; choose one of {BACKBONES}")
        if self.num_keypoints <= 0:
            raise ValueError(f"num_keypoints must be > 0, got {self.num_keypoints}")
        if self.split_ratio <= 0 or self.sigma <= 0:
            raise ValueError("split_ratio and sigma must be > 0")

    @property
    def bins(self) -> tuple[int, int]:
        """Number of (x, y) bins."""
        h, w = self.input_size
        return int(round(w * self.split_ratio)), int(round(h * self.split_ratio))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["input_size"] = list(self.input_size)
        d["tiny_dims"] = list(self.tiny_dims)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PoseModelConfig:
        d = dict(d)
        d["input_size"] = tuple(d["input_size"])
        d["tiny_dims"] = tuple(d.get("tiny_dims", (16, 32, 32, 64)))
        return cls(**d)


BACKBONES = ("tiny_vit_5m_224", "tiny")


def tiny_config(num_keypoints: int = 8, input_size: tuple[int, int] = (64, 64), **kw: Any) -> PoseModelConfig:
    """The CPU-test configuration: tiny TinyViT, 64x64 input, small head, sigma 2 bins."""
    defaults = dict(backbone="tiny", input_size=input_size, num_keypoints=num_keypoints, sigma=2.0, hidden=32)
    defaults.update(kw)
    return PoseModelConfig(**defaults)


def _timm():
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()  # timm imports torchvision, whose CUDA build needs the CPU shim here
    import timm

    return timm


def build_backbone(config: PoseModelConfig) -> nn.Module:
    """TinyViT without its classifier: ``forward_features(x) -> (B, C, H/32, W/32)``."""
    timm = _timm()
    if config.backbone == "tiny_vit_5m_224":
        net = timm.create_model("tiny_vit_5m_224", pretrained=False, num_classes=0, drop_path_rate=0.0)
    else:
        from timm.models.tiny_vit import TinyVit

        dims = tuple(config.tiny_dims)
        net = TinyVit(
            embed_dims=dims, depths=(1, 1, 1, 1), num_heads=tuple(max(1, d // 16) for d in dims),
            window_sizes=(2, 2, 2, 2), num_classes=0, drop_path_rate=0.0,
        )  # fmt: skip
    net.head = nn.Identity()  # unused; keeps every parameter on the forward path
    return net


class SimCCHead(nn.Module):
    """Backbone map (B, C, h, w) -> SimCC logits (B, K, Wx + Wy).

    A 1x1 conv gives one channel per keypoint; each keypoint's h*w map is flattened, passed through
    a shared Linear + GELU, then two Linear classifiers over the x and y bins.
    """

    def __init__(self, in_channels: int, feat_hw: tuple[int, int], num_keypoints: int, bins: tuple[int, int], hidden: int):
        super().__init__()
        self.bins = bins
        self.final = nn.Conv2d(in_channels, num_keypoints, kernel_size=1)
        self.mlp = nn.Sequential(nn.Linear(feat_hw[0] * feat_hw[1], hidden), nn.GELU())
        self.cls_x = nn.Linear(hidden, bins[0])
        self.cls_y = nn.Linear(hidden, bins[1])

    def forward(self, feats: Tensor) -> Tensor:
        z = self.mlp(self.final(feats).flatten(2))
        return torch.cat([self.cls_x(z), self.cls_y(z)], dim=-1)


class PoseModel(nn.Module):
    """``model(x) -> logits (B, K, Wx + Wy)`` for normalised images ``x`` (B, 3, H, W)."""

    def __init__(self, config: PoseModelConfig, backbone_init: str = "random"):
        super().__init__()
        self.config = config
        self.backbone_init = backbone_init  # "random:<seed>" or "file:<name>": recorded in results
        self.backbone = build_backbone(config)
        h, w = config.input_size
        with torch.no_grad():
            probe = self.backbone.forward_features(torch.zeros(1, 3, h, w))
        self.head = SimCCHead(probe.shape[1], (probe.shape[2], probe.shape[3]), config.num_keypoints, config.bins, config.hidden)

    def features(self, x: Tensor) -> Tensor:
        return self.backbone.forward_features(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))

    def train(self, mode: bool = True) -> PoseModel:
        super().train(mode)
        for m in self.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()  # frozen statistics: see the module docstring
        return self

    def split_logits(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        wx, _ = self.config.bins
        return logits[..., :wx], logits[..., wx:]

    def set_trainable(self, strategy: str) -> None:
        """"frozen": head only; "finetune" / "scratch": everything."""
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose one of {STRATEGIES}")
        for p in self.backbone.parameters():
            p.requires_grad_(strategy != "frozen")
        for p in self.head.parameters():
            p.requires_grad_(True)


STRATEGIES = ("frozen", "finetune", "scratch")


# --------------------------------------------------------------------------- weights
def default_weights_path() -> Path:
    from anonymask.core.paths import weights_root

    root = weights_root()
    return root / WEIGHTS_FILE if root else Path(WEIGHTS_FILE)


def load_backbone_state_dict(model: PoseModel, path: str | os.PathLike) -> None:
    """Load a timm TinyViT state dict (classifier keys ignored) into the backbone."""
    path = Path(path)
    if not path.is_file():
        raise MissingWeightsError("pose model backbone (TinyViT-5M)", [str(path)], hint=WEIGHTS_HINT)
    from timm.models.tiny_vit import checkpoint_filter_fn

    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    state = checkpoint_filter_fn(state, model.backbone)  # unwraps {"model": ...}, drops bias indices
    state = {k: v for k, v in state.items() if not k.startswith("head.")}
    missing, unexpected = model.backbone.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(
            f"{path}: not a {model.config.backbone} state dict (missing {list(missing)[:5]}, unexpected {list(unexpected)[:5]})"
        )


def build_pose_model(config: PoseModelConfig, weights: str | os.PathLike = "auto", seed: int = 0) -> PoseModel:
    """Build the pose model; the head always starts random (seeded).

    ``weights``: "auto" (the backbone file under $ANONYMASK_WEIGHTS when present, random otherwise),
    "pretrained" (that file; MissingWeightsError when absent), "random", or a path to a timm
    state dict. Only the "tiny_vit_5m_224" backbone has a weight file.
    """
    weights_s = str(weights)
    path: Path | None = None
    if weights_s in ("auto", "pretrained"):
        candidate = default_weights_path()
        if config.backbone == "tiny_vit_5m_224" and candidate.is_file():
            path = candidate
        elif weights_s == "pretrained":
            if config.backbone != "tiny_vit_5m_224":
                raise ValueError(f"pretrained weights exist for backbone 'tiny_vit_5m_224' only, not {config.backbone!r}")
            raise MissingWeightsError("pose model backbone (TinyViT-5M)", [str(candidate)], hint=WEIGHTS_HINT)
    elif weights_s != "random":
        path = Path(weights_s)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = PoseModel(config, backbone_init=f"file:{path.name}" if path else f"random:{seed}")
    if path is not None:
        load_backbone_state_dict(model, path)
    return model.train()


# --------------------------------------------------------------------------- SimCC targets/loss
def gaussian_targets(coords: Tensor, num_bins: int, split_ratio: float, sigma: float) -> Tensor:
    """Normalised Gaussian label distribution over ``num_bins`` per coordinate: (...,) -> (..., num_bins).

    Centred on ``coords * split_ratio`` (a continuous bin position), so its mode is the nearest
    bin and its mean the exact position (away from the borders).
    """
    bins = torch.arange(num_bins, dtype=coords.dtype, device=coords.device)
    logits = -0.5 * ((bins - coords.unsqueeze(-1) * split_ratio) / sigma) ** 2
    return torch.softmax(logits, dim=-1)  # = exp(.) / sum exp(.), stable far from the range too


def simcc_targets(keypoints: Tensor, config: PoseModelConfig) -> tuple[Tensor, Tensor]:
    """(..., K, 2) pixel coordinates -> (x targets (..., K, Wx), y targets (..., K, Wy))."""
    wx, wy = config.bins
    tx = gaussian_targets(keypoints[..., 0], wx, config.split_ratio, config.sigma)
    ty = gaussian_targets(keypoints[..., 1], wy, config.split_ratio, config.sigma)
    return tx, ty


def _kl(target: Tensor, logits: Tensor) -> Tensor:
    """KL(target || softmax(logits)) over the last axis (0 log 0 = 0)."""
    cross = torch.where(target > 0, target * F.log_softmax(logits, dim=-1), torch.zeros_like(target))
    return (torch.xlogy(target, target) - cross).sum(-1)


def simcc_loss_fn(config: PoseModelConfig):
    """Per-sample SimCC loss ``loss(logits (B,K,Wx+Wy), target (B,K,3)) -> (B,)``.

    ``target[..., :2]`` are keypoint pixel coordinates, ``target[..., 2]`` the visibility weight
    (0 = not annotated: contributes nothing). The mean is over all K keypoints (a fixed
    denominator, so a sample's loss is a plain sum of its visible keypoints' terms).
    """
    wx, _ = config.bins

    def loss(logits: Tensor, target: Tensor) -> Tensor:
        logits = logits.float()
        tx, ty = simcc_targets(target[..., :2].float(), config)
        per_kp = _kl(tx, logits[..., :wx]) + _kl(ty, logits[..., wx:])
        return (per_kp * target[..., 2].float()).sum(-1) / target.shape[-2]

    return loss


# --------------------------------------------------------------------------- decoding
def decode(logits: Tensor, config: PoseModelConfig, soft: bool = False, beta: float = 1.0) -> tuple[Tensor, Tensor]:
    """Logits (..., K, Wx+Wy) -> (keypoints (..., K, 2) in pixels, confidence (..., K)).

    argmax (default): bin of the highest logit / split_ratio. ``soft``: expectation of the bin
    index under softmax(beta * logits) / split_ratio (sub-bin, but pulled to the centre by mass far
    from the peak). Confidence: the smaller of the x and y peak probabilities.
    """
    wx, wy = config.bins
    lx, ly = logits[..., :wx].float(), logits[..., wx:].float()
    px, py = torch.softmax(beta * lx, -1), torch.softmax(beta * ly, -1)
    if soft:
        x = (px * torch.arange(wx, dtype=px.dtype, device=px.device)).sum(-1)
        y = (py * torch.arange(wy, dtype=py.dtype, device=py.device)).sum(-1)
    else:
        x, y = lx.argmax(-1).to(px.dtype), ly.argmax(-1).to(py.dtype)
    conf = torch.minimum(px.max(-1).values, py.max(-1).values)
    return torch.stack([x, y], dim=-1) / config.split_ratio, conf

