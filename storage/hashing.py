"""Content hashes for configs and arrays: what makes a stage record comparable across runs."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal configs hash equally."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_default)


def _default(obj: Any):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    return str(obj)


def config_hash(config: Any) -> str:
    """Short stable hash of a JSON-able config."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:16]


def combine_hashes(*parts: str) -> str:
    """Hash of several hashes (order matters): the input hash of a stage."""
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


class ArrayHasher:
    """The checksum of :func:`array_checksum`, fed frame blocks in order (for streamed writes).

    The shape is part of the hash and comes first, so the full shape must be known up front; the
    blocks may have any lengths along axis 0. ``hexdigest()`` refuses if fewer or more frames
    than the shape says were fed.
    """

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.frames = 0
        self._h = hashlib.blake2b(digest_size=16)
        self._h.update(canonical_json({"shape": self.shape, "dtype": str(self.dtype)}).encode())

    def update(self, block) -> None:
        # the array's own C-order buffer is hashed (no bytes copy: hashing is a stream over every
        # frame a stage writes)
        b = np.ascontiguousarray(np.asarray(block, dtype=self.dtype))
        if len(self.shape) == 0:
            self._h.update(b)
            self.frames = 1
            return
        if b.shape[1:] != self.shape[1:]:
            raise ValueError(f"block of shape {b.shape} does not fit an array of shape {self.shape}")
        self._h.update(b)
        self.frames += b.shape[0]

    def hexdigest(self) -> str:
        expected = self.shape[0] if self.shape else 1
        if self.frames != expected:
            raise ValueError(f"checksum fed {self.frames} frames, the array has {expected}")
        return self._h.hexdigest()


def array_checksum(arr, block_frames: int = 16) -> str:
    """blake2b over shape, dtype and C-order bytes, read in blocks of frames (bounded memory)."""
    shape = tuple(int(s) for s in arr.shape)
    h = ArrayHasher(shape, arr.dtype)
    if len(shape) == 0:
        h.update(np.asarray(arr))
        return h.hexdigest()
    for start in range(0, shape[0], block_frames):
        h.update(np.asarray(arr[start : start + block_frames]))
    return h.hexdigest()


def file_checksum(path, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes (the source checksum in a video's attrs)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()
