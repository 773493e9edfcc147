"""Skeleton graphs (parents per joint) and the adjacency partitions a graph convolution uses.

Two joint sets reach the skeleton models: the 25 Kinect v2 joints of NTU RGB+D and the joints of
SMPL-H pose tracks (52 = 22 body + 2 x 15 finger joints; the 22 body joints are what a body-only
classifier needs). Parents are 0-based (-1 for the root); in the NTU order a parent may come after
its child (the neck's parent is joint 20), use :meth:`SkeletonGraph.topological_order` to walk it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# NTU RGB+D / Kinect v2, 0-based. 0 spine base, 1 spine mid, 2 neck, 3 head, 4-7 left
# shoulder/elbow/wrist/hand, 8-11 right shoulder/elbow/wrist/hand, 12-15 left hip/knee/ankle/foot,
# 16-19 right hip/knee/ankle/foot, 20 spine at the shoulders, 21/22 left hand tip/thumb,
# 23/24 right hand tip/thumb.
_NTU25_PARENTS = (-1, 0, 20, 2, 20, 4, 5, 6, 20, 8, 9, 10, 0, 12, 13, 14, 0, 16, 17, 18, 1, 7, 7, 11, 11)
NTU25_NAMES = (
    "spine_base", "spine_mid", "neck", "head",
    "l_shoulder", "l_elbow", "l_wrist", "l_hand",
    "r_shoulder", "r_elbow", "r_wrist", "r_hand",
    "l_hip", "l_knee", "l_ankle", "l_foot",
    "r_hip", "r_knee", "r_ankle", "r_foot",
    "spine_shoulder", "l_hand_tip", "l_thumb", "r_hand_tip", "r_thumb",
)

# SMPL / SMPL-H body joints: 0 pelvis, 1/2 l/r hip, 3 spine1, 4/5 l/r knee, 6 spine2, 7/8 l/r ankle,
# 9 spine3, 10/11 l/r foot, 12 neck, 13/14 l/r collar, 15 head, 16/17 l/r shoulder, 18/19 l/r elbow,
# 20/21 l/r wrist.
_SMPL22_PARENTS = (-1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19)


def _smplh52_parents() -> tuple[int, ...]:
    # Fingers follow the body: per hand five chains of three joints (index, middle, pinky, ring,
    # thumb), each chain hanging from that hand's wrist (left 20, right 21).
    parents = list(_SMPL22_PARENTS)
    for wrist in (20, 21):
        for _finger in range(5):
            first = len(parents)
            parents += [wrist, first, first + 1]
    return tuple(parents)


@dataclass(frozen=True)
class SkeletonGraph:
    """A kinematic tree: ``parents[j]`` is the parent of joint j (-1 for the root)."""

    name: str
    parents: tuple[int, ...]
    root: int = 0
    left_hip: int | None = None
    right_hip: int | None = None

    @property
    def num_joints(self) -> int:
        return len(self.parents)

    def topological_order(self) -> list[int]:
        """Joints ordered so every parent comes before its children."""
        order, placed = [], set()
        while len(order) < self.num_joints:
            progressed = False
            for j, p in enumerate(self.parents):
                if j not in placed and (p < 0 or p in placed):
                    order.append(j)
                    placed.add(j)
                    progressed = True
            if not progressed:
                raise ValueError(f"graph {self.name} has a cycle")
        return order

    def edges(self) -> list[tuple[int, int]]:
        """(child, parent) pairs, i.e. the bones."""
        return [(j, p) for j, p in enumerate(self.parents) if p >= 0]

    def bone_lengths(self, x: np.ndarray) -> np.ndarray:
        """Bone lengths of joint positions ``x`` (..., J, 3) -> (..., J-1)."""
        child, parent = np.array(self.edges()).T
        return np.linalg.norm(x[..., child, :] - x[..., parent, :], axis=-1)


def retarget_bone_lengths(x: np.ndarray, graph: SkeletonGraph, lengths: np.ndarray) -> np.ndarray:
    """Give joints ``x`` (..., J, 3) the bone ``lengths`` (J-1,) in :meth:`SkeletonGraph.edges`
    order, keeping the root and every bone's direction: the same motion on a template body.

    A deterministic anonymizer for body proportions (the "same skeleton for everyone" baseline);
    what identity survives it is carried by the motion itself.
    """
    x = np.asarray(x)
    lengths = np.asarray(lengths, np.float64)
    if lengths.shape != (graph.num_joints - 1,):
        raise ValueError(f"expected {graph.num_joints - 1} bone lengths, got shape {lengths.shape}")
    length_of = {child: lengths[i] for i, (child, _parent) in enumerate(graph.edges())}
    out = np.empty(x.shape, np.float64)
    for j in graph.topological_order():
        p = graph.parents[j]
        if p < 0:
            out[..., j, :] = x[..., j, :]
            continue
        bone = x[..., j, :].astype(np.float64) - x[..., p, :]
        norm = np.linalg.norm(bone, axis=-1, keepdims=True)
        out[..., j, :] = out[..., p, :] + bone / np.maximum(norm, 1e-9) * length_of[j]
    return out.astype(x.dtype if x.dtype.kind == "f" else np.float32)


NTU25 = SkeletonGraph("ntu25", _NTU25_PARENTS, root=0, left_hip=12, right_hip=16)
SMPL22 = SkeletonGraph("smpl22", _SMPL22_PARENTS, root=0, left_hip=1, right_hip=2)
SMPLH52 = SkeletonGraph("smplh52", _smplh52_parents(), root=0, left_hip=1, right_hip=2)

GRAPHS: dict[str, SkeletonGraph] = {g.name: g for g in (NTU25, SMPL22, SMPLH52)}
_BY_JOINTS: dict[int, SkeletonGraph] = {g.num_joints: g for g in (NTU25, SMPL22, SMPLH52)}


def get_graph(graph: str | int | SkeletonGraph | None, num_joints: int | None = None) -> SkeletonGraph | None:
    """Resolve a graph by name, by joint count, or pass one through; None if nothing matches.

    ``graph=None`` picks the known graph with ``num_joints`` joints (25 -> NTU, 22 -> SMPL body,
    52 -> SMPL-H), or None for any other count (models then fall back to a graph-free layer).
    """
    if isinstance(graph, SkeletonGraph):
        found = graph
    elif isinstance(graph, str):
        if graph not in GRAPHS:
            raise ValueError(f"unknown skeleton graph {graph!r}; known: {', '.join(sorted(GRAPHS))}")
        found = GRAPHS[graph]
    elif isinstance(graph, int):
        found = _BY_JOINTS.get(graph)
    elif graph is None:
        found = _BY_JOINTS.get(num_joints) if num_joints is not None else None
    else:
        raise TypeError(f"graph must be a name, a joint count or a SkeletonGraph, not {type(graph).__name__}")
    if found is not None and num_joints is not None and found.num_joints != num_joints:
        raise ValueError(f"graph {found.name} has {found.num_joints} joints, the data has {num_joints}")
    return found


def adjacency_partitions(graph: SkeletonGraph | None, num_joints: int) -> np.ndarray:
    """Normalised adjacency partitions (K, J, J) for a graph convolution.

    With a graph: the spatial partitioning of ST-GCN-style models, K = 3 (the joint itself, its
    parent = towards the root, its children = away from the root), each row-normalised so a joint
    averages over the neighbours of that kind. Without one: K = 2 (the joint itself, the mean of all
    joints), which keeps the model usable for any joint count.
    """
    eye = np.eye(num_joints, dtype=np.float32)
    if graph is None:
        return np.stack([eye, np.full((num_joints, num_joints), 1.0 / num_joints, np.float32)])
    if graph.num_joints != num_joints:
        raise ValueError(f"graph {graph.name} has {graph.num_joints} joints, expected {num_joints}")
    inward = np.zeros_like(eye)
    outward = np.zeros_like(eye)
    for child, parent in graph.edges():
        inward[child, parent] = 1.0  # a child gathers from its parent
        outward[parent, child] = 1.0  # a parent gathers from its children
    parts = [eye, inward, outward]
    out = []
    for a in parts:
        deg = a.sum(axis=1, keepdims=True)
        out.append(np.divide(a, deg, out=np.zeros_like(a), where=deg > 0))
    return np.stack(out).astype(np.float32)
