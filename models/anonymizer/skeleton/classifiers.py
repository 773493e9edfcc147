"""Small spatio-temporal graph-convolution classifiers for skeleton sequences (B, T, J, 3).

One architecture serves every label: actions (the utility the anonymizer must keep) and the
private attributes an attacker wants (subject identity for re-identification, gender). It is an
ST-GCN-style stack: a graph convolution over the skeleton (self / towards root / away from root
partitions, with learnable edge weights) followed by a temporal convolution, a few blocks, global
pooling and a linear head. Small by default so training runs in seconds on a CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from anonymask.models.anonymizer.skeleton.graphs import SkeletonGraph, adjacency_partitions, get_graph

FEATURES = ("pos", "vel", "bone", "length")
_WIDTH = {"pos": 3, "vel": 3, "bone": 3, "length": 1}


class _GraphTemporalBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, adjacency: np.ndarray, stride: int, kernel: int, dropout: float):
        super().__init__()
        k = adjacency.shape[0]
        self.register_buffer("adjacency", torch.as_tensor(adjacency))
        self.edge_weight = nn.Parameter(torch.ones_like(self.adjacency))
        self.spatial = nn.Conv2d(k * c_in, c_out, 1)
        self.bn_s = nn.BatchNorm2d(c_out)
        self.temporal = nn.Sequential(
            nn.Conv2d(c_out, c_out, (kernel, 1), stride=(stride, 1), padding=(kernel // 2, 0)),
            nn.BatchNorm2d(c_out),
            nn.Dropout(dropout),
        )
        if c_in == c_out and stride == 1:
            self.residual: nn.Module = nn.Identity()
        else:
            self.residual = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=(stride, 1)), nn.BatchNorm2d(c_out))
        self.act = nn.ReLU()

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (B, C, T, J)
        # Aggregate neighbours first (one GEMM over the K partitions), then mix channels: the same
        # map as ST-GCN's (conv per partition, then aggregate), cheaper when c_in < c_out.
        b, c, t, j = h.shape
        k = self.adjacency.shape[0]
        a = (self.adjacency * self.edge_weight).transpose(1, 2).permute(1, 0, 2).reshape(j, k * j)  # [v, k*w]
        z = (h @ a).view(b, c, t, k, j).permute(0, 3, 1, 2, 4).reshape(b, k * c, t, j)
        z = self.act(self.bn_s(self.spatial(z)))
        return self.act(self.temporal(z) + self.residual(h))


class SkeletonClassifier(nn.Module):
    """Classify a skeleton sequence (B, T, J, 3) into ``num_classes`` (any T).

    graph: a :class:`SkeletonGraph`, its name ("ntu25", "smpl22", "smplh52"), or None to pick the
    known graph with J joints (a graph-free self + global-mean layer for other J). features: which
    per-joint inputs to stack: positions, velocities (frame differences), bone vectors (joint minus
    parent) and bone lengths (the last two need a graph). Bone lengths are the strongest static
    identity cue; giving them to every classifier makes the re-identification attacker strong, as
    a privacy evaluation needs.
    """

    def __init__(
        self,
        num_joints: int,
        num_classes: int,
        graph: SkeletonGraph | str | None = None,
        *,
        channels: Sequence[int] = (32, 64),
        temporal_kernel: int = 9,
        dropout: float = 0.1,
        features: Sequence[str] | None = None,
    ):
        super().__init__()
        self.graph = get_graph(graph, num_joints)
        if features is None:
            features = FEATURES if self.graph is not None else ("pos", "vel")
        unknown = set(features) - set(FEATURES)
        if unknown or not features:
            raise ValueError(f"features must be a non-empty subset of {FEATURES}, got {tuple(features)}")
        if {"bone", "length"} & set(features) and self.graph is None:
            raise ValueError("bone and length features need a skeleton graph")
        self.features = tuple(features)
        self.num_joints = num_joints
        self.num_classes = num_classes
        if self.graph is not None:
            self.register_buffer("parents", torch.tensor([max(p, 0) for p in self.graph.parents]))
        c_in = sum(_WIDTH[f] for f in self.features)
        self.data_bn = nn.BatchNorm1d(c_in * num_joints)
        adjacency = adjacency_partitions(self.graph, num_joints)
        blocks = []
        for i, c in enumerate(channels):
            blocks.append(_GraphTemporalBlock(c_in, c, adjacency, 1 if i == 0 else 2, temporal_kernel, dropout))
            c_in = c
        self.blocks = nn.Sequential(*blocks)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(c_in, num_classes)

    def _inputs(self, x: torch.Tensor) -> torch.Tensor:
        parts = []
        if "pos" in self.features:
            parts.append(x)
        if "vel" in self.features:
            parts.append(torch.cat([x[:, 1:] - x[:, :-1], torch.zeros_like(x[:, :1])], dim=1))
        if "bone" in self.features or "length" in self.features:
            bone = x - x[:, :, self.parents]
            if "bone" in self.features:
                parts.append(bone)
            if "length" in self.features:
                parts.append(bone.norm(dim=-1, keepdim=True))
        return torch.cat(parts, dim=-1)  # (B, T, J, C)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled features before the head (B, channels[-1])."""
        if x.ndim != 4 or x.shape[-2:] != (self.num_joints, 3):
            raise ValueError(f"expected (B, T, {self.num_joints}, 3) joints, got {tuple(x.shape)}")
        f = self._inputs(x)
        b, t, j, c = f.shape
        f = self.data_bn(f.permute(0, 3, 2, 1).reshape(b, c * j, t))
        h = f.view(b, c, j, t).permute(0, 1, 3, 2)  # (B, C, T, J)
        return self.blocks(h).mean(dim=(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(self.embed(x)))
