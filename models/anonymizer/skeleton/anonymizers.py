"""Skeleton anonymizers f: (B, T, J, 3) -> (B, T, J, 3), residual and the identity at start.

Both predict a displacement that is added to the input, with the last layer initialised near zero,
so training starts from f(x) ~ x (full utility, no privacy) and moves away only as far as the
privacy term pays for; the reconstruction term measures exactly that displacement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from anonymask.models.anonymizer.skeleton.data import denormalize_sequence, normalize_sequence


def _near_zero_(layer: nn.Module, scale: float) -> None:
    nn.init.uniform_(layer.weight, -scale, scale)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)


def _check_input(x: torch.Tensor, num_joints: int) -> None:
    if x.ndim != 4 or x.shape[-2:] != (num_joints, 3):
        raise ValueError(f"expected (B, T, {num_joints}, 3) joints, got {tuple(x.shape)}")


class ResidualMLPAnonymizer(nn.Module):
    """Per-frame MLP on the J*3 coordinates of a frame: f(x) = x + MLP(x).

    It sees one pose at a time, so it can change body shape and pose (bone lengths, posture) but
    not timing; that is the paper's light-weight variant.
    """

    def __init__(self, num_joints: int, hidden: int = 256, layers: int = 3, init_scale: float = 1e-4):
        super().__init__()
        if layers < 1:
            raise ValueError("layers must be >= 1")
        self.num_joints = num_joints
        self.config = {"kind": "mlp", "num_joints": num_joints, "hidden": hidden, "layers": layers}
        d = num_joints * 3
        mods: list[nn.Module] = []
        width = d
        for _ in range(layers - 1):
            mods += [nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.GELU()]
            width = hidden
        self.body = nn.Sequential(*mods)
        self.out = nn.Linear(width, d)
        _near_zero_(self.out, init_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.num_joints)
        b, t = x.shape[:2]
        flat = x.reshape(b, t, -1)
        return x + self.out(self.body(flat)).reshape_as(x)


class _ConvBlock(nn.Sequential):
    def __init__(self, c_in: int, c_out: int):
        groups = 8 if c_out % 8 == 0 else 1
        super().__init__(
            nn.Conv1d(c_in, c_out, 3, padding=1), nn.GroupNorm(groups, c_out), nn.GELU(),
            nn.Conv1d(c_out, c_out, 3, padding=1), nn.GroupNorm(groups, c_out), nn.GELU(),
        )


class UNetAnonymizer(nn.Module):
    """1-D U-Net over time on J*3 channels: f(x) = x + UNet(x).

    Sees the whole sequence, so it can also change timing and gait style. ``channels`` is the width
    of the first level (doubled per level), ``depth`` the number of 2x downsamplings; any T works
    (the input is padded by edge replication to a multiple of 2**depth and cropped back).
    """

    def __init__(self, num_joints: int, channels: int = 64, depth: int = 3, init_scale: float = 1e-4):
        super().__init__()
        if depth < 0:
            raise ValueError("depth must be >= 0")
        self.num_joints = num_joints
        self.depth = depth
        self.config = {"kind": "unet", "num_joints": num_joints, "channels": channels, "depth": depth}
        d = num_joints * 3
        widths = [channels * 2**i for i in range(depth + 1)]
        self.inp = _ConvBlock(d, widths[0])
        self.down = nn.ModuleList(
            nn.Sequential(nn.Conv1d(widths[i], widths[i], 4, stride=2, padding=1), _ConvBlock(widths[i], widths[i + 1]))
            for i in range(depth)
        )
        self.up = nn.ModuleList(nn.ConvTranspose1d(widths[i + 1], widths[i], 2, stride=2) for i in range(depth))
        self.merge = nn.ModuleList(_ConvBlock(2 * widths[i], widths[i]) for i in range(depth))
        self.out = nn.Conv1d(widths[0], d, 1)
        _near_zero_(self.out, init_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.num_joints)
        b, t = x.shape[:2]
        h = x.reshape(b, t, -1).transpose(1, 2)  # (B, J*3, T)
        multiple = 2**self.depth
        padded = -(-t // multiple) * multiple
        if padded != t:
            h = F.pad(h, (0, padded - t), mode="replicate")
        skips = [self.inp(h)]
        for down in self.down:
            skips.append(down(skips[-1]))
        h = skips.pop()
        for i in reversed(range(self.depth)):
            h = self.merge[i](torch.cat([self.up[i](h), skips.pop()], dim=1))
        delta = self.out(h)[..., :t].transpose(1, 2).reshape_as(x)
        return x + delta


def build_anonymizer(config: dict[str, Any]) -> nn.Module:
    """Rebuild an anonymizer from its ``.config`` (to load a saved ``state_dict``)."""
    cfg = dict(config)
    kind = cfg.pop("kind")
    if kind == "mlp":
        return ResidualMLPAnonymizer(**cfg)
    if kind == "unet":
        return UNetAnonymizer(**cfg)
    raise ValueError(f"unknown anonymizer kind {kind!r} (mlp, unet)")


def save_anonymizer(path: str | Path, row: dict[str, Any]) -> Path:
    """Write an experiment row with ``anonymizer_state`` as a checkpoint: the weights, the config
    to rebuild them, the normalisation they expect and the row's evaluation (scalars only)."""
    if "anonymizer_state" not in row:
        raise ValueError("the row has no anonymizer_state (run the experiment with keep_states=True)")
    evaluation = {k: v for k, v in row.items() if isinstance(v, (int, float, str, type(None)))}
    payload = {
        "config": dict(row["anonymizer_config"]),
        "state_dict": row["anonymizer_state"],
        "normalization": dict(row.get("normalization") or {"root_joint": 0, "align_hips": None}),
        "evaluation": evaluation,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, path)
    return path


def load_anonymizer(path: str | Path) -> tuple[nn.Module, dict[str, Any]]:
    """(anonymizer in eval mode, checkpoint metadata: config, normalization, evaluation)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: anonymizer checkpoint not found")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    model = build_anonymizer(payload["config"])
    model.load_state_dict(payload["state_dict"])
    model.eval()
    return model, {k: v for k, v in payload.items() if k != "state_dict"}


@torch.no_grad()
def anonymize_array(anonymizer: nn.Module, x: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Apply ``anonymizer`` to a sequence (T,J,3) or a batch (N,T,J,3) of NORMALISED joints."""
    x = np.asarray(x, np.float32)
    single = x.ndim == 3
    xb = x[None] if single else x
    was_training = anonymizer.training
    anonymizer.eval()
    device = next(anonymizer.parameters()).device
    out = [anonymizer(torch.from_numpy(xb[i : i + batch_size]).to(device)).cpu().numpy() for i in range(0, len(xb), batch_size)]
    anonymizer.train(was_training)
    res = np.concatenate(out) if out else xb.copy()
    return res[0] if single else res


def anonymize_track(
    anonymizer: nn.Module,
    joints: np.ndarray,
    root_joint: int = 0,
    align_hips: tuple[int, int] | None = None,
) -> np.ndarray:
    """Anonymize one track of joints (T,J,3) in world coordinates: normalise as in training, apply,
    and put the result back where the person stood (what the pipeline's motion stage needs)."""
    x_norm, params = normalize_sequence(joints, root_joint, align_hips=align_hips)
    return denormalize_sequence(anonymize_array(anonymizer, x_norm), params)
