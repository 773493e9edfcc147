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


def array_checksum(arr, block_frames: int = 16) -> str:
    """blake2b over shape, dtype and C-order bytes, read in blocks of frames (bounded memory)."""
    h = hashlib.blake2b(digest_size=16)
    shape = tuple(int(s) for s in arr.shape)
    h.update(canonical_json({"shape": shape, "dtype": str(np.dtype(arr.dtype))}).encode())
    if len(shape) == 0:
        h.update(np.ascontiguousarray(np.asarray(arr)).tobytes())
        return h.hexdigest()
    for start in range(0, shape[0], block_frames):
        block = np.ascontiguousarray(np.asarray(arr[start : start + block_frames]))
        h.update(block.tobytes())
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
