"""Are two stores' results bit-identical across the per-track layout change (issue 11)?

Every array of video ``v`` (the scaling harness's stores) in a store written with the old
(T, N, H, W) per-track layout and one written with the per-track spans (storage/tracks.py),
compared 64 frames at a time; the old per-track arrays against the new ones read with zeros
outside each track's span.

    python scripts/compare_track_layout.py OLD.zarr NEW.zarr
"""
import sys

import numpy as np

from anonymask.storage.store import DatasetStore
from anonymask.storage.tracks import read_window

old = DatasetStore.open(sys.argv[1]).video("v")
new = DatasetStore.open(sys.argv[2]).video("v")
PER_TRACK = ("render/track_masks", "person_track_alphas")


def names(g, prefix=""):
    for n, _ in g.arrays():
        yield prefix + n
    for n, sub in g.groups():
        yield from names(sub, prefix + n + "/")


a_names = set(names(old.group))
b_names = set(names(new.group))
b_plain = {n for n in b_names if not any(n.startswith(p + "/") or n == p + "_spans" for p in PER_TRACK)}
print("only in old:", sorted(a_names - b_plain - set(PER_TRACK)), "only in new:", sorted(b_plain - a_names))
T = old.num_frames
bad = []
checked = 0
for n in sorted(a_names & b_plain):
    x, y = old.array(n), new.array(n)
    if x.shape != y.shape or x.dtype != y.dtype:
        bad.append((n, "shape/dtype", x.shape, y.shape))
        continue
    if x.ndim and x.shape[0] == T and x.ndim >= 3:
        for s in range(0, T, 64):
            if not np.array_equal(np.asarray(x[s:s + 64]), np.asarray(y[s:s + 64]), equal_nan=x.dtype.kind == "f"):
                bad.append((n, s))
                break
    elif not np.array_equal(np.asarray(x[...]), np.asarray(y[...]), equal_nan=x.dtype.kind == "f"):
        bad.append(n)
    checked += 1
for p in PER_TRACK:
    x = old.array(p)
    for s in range(0, T, 64):
        e = min(T, s + 64)
        blk = np.asarray(x[s:e])
        got = read_window(new, p, s, e)
        for j in range(blk.shape[1]):
            want = blk[:, j]
            have = got.get(j, np.zeros_like(want))
            if not np.array_equal(want, have):
                bad.append((p, j, s))
    checked += 1
print(f"checked {checked} arrays; differences: {bad}")
