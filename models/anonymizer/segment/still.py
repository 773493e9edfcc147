"""Where someone stands still: the pixels that get more margin for a whole block of frames (the
segment stage's ``static_*`` settings). The temporal median never sees past a still person's
outline, so a still person's mask is widened where they stood, not only where they were found."""

from __future__ import annotations

import cv2
import numpy as np

from anonymask.models.anonymizer.segment.masks import grow


class StillRegions:
    """Where someone stands still, per block of ``block`` frames: the pixels in the mask in at
    least ``frac`` of the block's frames (and ``context`` frames either side), with the pixels in it
    in at least ``extend`` of them that touch those, within ``reach`` x their height. The temporal median
    never sees past a still person's outline, so these pixels get ``pixels`` more margin in every
    frame of the block.

    Blocks are fixed frame ranges (0..block-1, block..2*block-1, ...) whatever window the stage
    reads, so the result does not depend on the window size; a context frame read for unflicker
    takes the still region of its own block. Memory: one (H,W) map per block in use.
    """

    def __init__(self, t_len: int, block: int, context: int, thr: float, frac: float, pixels: int,
                 extend: float, reach: float):
        self.t_len, self.block, self.context = int(t_len), max(1, int(block)), int(context)
        self.thr, self.frac, self.pixels = float(thr), float(frac), int(pixels)
        self.extend, self.reach = min(float(extend), self.frac), float(reach)
        self._cache: dict[int, np.ndarray | None] = {}

    def span(self, k: int) -> tuple[int, int]:
        """Frames whose masks decide block ``k``'s still region."""
        return max(0, k * self.block - self.context), min(self.t_len, (k + 1) * self.block + self.context)

    def region(self, k: int, read) -> tuple[np.ndarray, int] | None:
        """Block ``k``'s still pixels, grown, as connected parts ((H,W) int32 labels 1..n, n), or
        None: nobody still. ``read(a, b)`` gives prob."""
        if k not in self._cache:
            a, b = self.span(k)
            prob = read(a, b)
            share = (prob >= self.thr).mean(axis=0) if len(prob) > 2 else None
            still = None if share is None else share >= self.frac
            if still is not None and still.any() and self.extend < self.frac:
                # hysteresis: the pixels in the mask in >= ``extend`` of the frames that touch a
                # still core join it (a still person's head or feet that the detector lost for a
                # while), within ``reach`` x the core part's height of it (not clutter beyond)
                n_c, lab, st, _ = cv2.connectedComponentsWithStats(still.view(np.uint8), connectivity=8)
                near = np.zeros_like(still)
                for c in range(1, n_c):
                    near |= grow(lab == c, int(round(self.reach * st[c, cv2.CC_STAT_HEIGHT])))
                n_ext, ext = cv2.connectedComponents(((share >= self.extend) & near).view(np.uint8), connectivity=8)
                cores = np.zeros(n_ext, bool)
                cores[ext[still]] = True
                cores[0] = False
                still = cores[ext]
            self._cache = {j: v for j, v in self._cache.items() if j >= k - 1}  # blocks come in order
            if still is None or not still.any():
                self._cache[k] = None
            else:
                n, labels = cv2.connectedComponents(grow(still, self.pixels).view(np.uint8), connectivity=8)
                self._cache[k] = (labels.astype(np.int32), int(n) - 1)
        return self._cache[k]

    def apply(self, prob: np.ndarray, a0: int, read, present: np.ndarray | None = None) -> np.ndarray:
        """``prob`` of frames a0.. raised to just above the threshold on its block's still region,
        in each frame on the parts of it where someone is in that frame (``present`` (n,H,W) bool:
        the frame's own mask; None: every part in every frame). A part is not added to the frames
        before its person came or after they left (there it would be a hole with no avatar on it,
        which the audit fails as an erased person; docs/RESULTS.md names the clip)."""
        out = prob
        for k in range(a0 // self.block, (a0 + len(prob) - 1) // self.block + 1):
            reg = self.region(k, read)
            if reg is None:
                continue
            if out is prob:
                out = prob.copy()
            labels, n = reg
            lift = np.float32(self.thr + 1e-3)
            for c in range(max(a0, k * self.block) - a0, min(a0 + len(prob), (k + 1) * self.block) - a0):
                if present is None:
                    here = labels > 0
                else:
                    seen = np.zeros(n + 1, bool)
                    seen[labels[present[c]]] = True
                    seen[0] = False
                    here = seen[labels]
                np.maximum(out[c], here.astype(np.float32) * lift, out=out[c])
        return out
