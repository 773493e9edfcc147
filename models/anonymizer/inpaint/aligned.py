"""Moving-camera inpainting: each hole is filled from the shot's other frames, aligned onto it.

The temporal median (backends.py) needs a still view: over a hand-held or panning shot it is a
smear of other places, and the frame-by-frame ``opencv`` fill blurs a whole person's hole from
its rim. Here every frame's neighbours (up to ``reach`` frames away, every ``step``-th) are mapped
onto it by a homography: corner features outside every person's mask, followed by Lucas-Kanade
from each frame to the next on a ``width``-px grey copy, RANSAC; a neighbour further away by
composing those steps (a step that cannot be measured, a flat or blurred frame, ends the chain).
Each hole pixel takes the median of the aligned neighbours' pixels that lie outside every
person's hole in *their own* frame, grown by ``guard`` px against alignment error: the temporal
median's rule, so a person is never copied into the hole, not even one the camera follows (their
pixels are in the hole of every frame). Pixels no aligned neighbour shows are filled spatially
(``cv2.inpaint``), as the ``opencv`` backend fills the whole hole.

A homography is exact for a camera that turns and for a far or flat scene; near objects at
another depth (parallax) land a little off, which blurs or doubles background, never a person.
"""

from __future__ import annotations

from typing import Annotated

import cv2
import numpy as np
from pydantic import Field

from anonymask.core.registry import register
from anonymask.models.anonymizer.inpaint.backends import EMPTY_FILL, _check, _method, masked_temporal_median
from anonymask.models.shared.align import chain_maps, small_grey, step_homographies


def _small(video: np.ndarray, hole: np.ndarray, width: int) -> tuple[list[np.ndarray], list[np.ndarray], float]:
    """Grey copies ``width`` px wide, the masks of where their features may be (outside the holes,
    dilated), and the scale factor small/full."""
    k = 1.0
    grey, usable = [], []
    for f, m in zip(video, hole):
        g, k = small_grey(f, width)
        grey.append(g)
        u = np.full(g.shape, 255, np.uint8)
        if m.any():
            small = cv2.resize(m.view(np.uint8), g.shape[::-1], interpolation=cv2.INTER_NEAREST)
            u[cv2.dilate(small, np.ones((5, 5), np.uint8)) > 0] = 0
        usable.append(u)
    return grey, usable, k


@register("inpaint", "aligned_median",
          summary="moving cameras: the masked median of neighbour frames aligned by homography")
class AlignedMedianInpainter:
    """See the module docstring. ``reach``: frames either side a hole is filled from; ``step``:
    every step-th of them; ``guard``: px a source pixel must lie from every hole of its own frame;
    ``width``: px width the alignment is measured at; ``min_inliers``: RANSAC inliers a step
    needs; ``method``/``radius``: the spatial fill of pixels no neighbour shows."""

    def __init__(
        self,
        reach: Annotated[int, Field(ge=1)] = 12,
        step: Annotated[int, Field(ge=1)] = 2,
        guard: Annotated[int, Field(ge=0)] = 3,
        width: Annotated[int, Field(ge=32)] = 320,
        min_inliers: Annotated[int, Field(ge=8)] = 24,
        method: str = "telea",
        radius: int = 5,
    ):
        self.reach, self.step, self.guard = int(reach), int(step), int(guard)
        self.width, self.min_inliers = int(width), int(min_inliers)
        self.method, self.radius = _method(method), int(radius)
        self.aligned = 0  # source frames used (diagnostics)
        self.spatial = 0  # hole pixels no neighbour showed

    def inpaint(self, video: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.fill(video, mask)[0]

    def fill(self, video: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inpainted frames and the hole pixels no aligned neighbour showed (filled spatially)."""
        video, hole = _check(video, mask)
        return self._fill(video, hole, range(video.shape[0]))

    def inpaint_stream(self, read, t_len: int, write, window: int = 64, context: int = 16, **_) -> None:
        """Window by window, each with ``context`` frames either side to draw from (at most
        ``window + 2 * context`` frames in memory)."""
        for t0 in range(0, t_len, window):
            t1 = min(t_len, t0 + window)
            a0, a1 = max(0, t0 - context), min(t_len, t1 + context)
            video, hole = _check(*read(a0, a1))
            write(t0, *self._fill(video, hole, range(t0 - a0, t1 - a0)))

    def _fill(self, video: np.ndarray, hole: np.ndarray, targets) -> tuple[np.ndarray, np.ndarray]:
        """Frames ``targets`` of the clip, inpainted from the clip's other frames, and their made-up
        pixels (the hole pixels filled spatially)."""
        targets = list(targets)
        out = video[targets].copy()
        made = np.zeros(out.shape[:3], bool)
        if not hole[targets].any():
            return out, made
        grey, usable, k = _small(video, hole, self.width)
        to_first, chain = chain_maps(step_homographies(grey, usable, min_inliers=self.min_inliers))
        scale = np.diag([k, k, 1.0])
        full = [np.linalg.inv(scale) @ m @ scale for m in to_first]  # full-res pixels -> chain's first frame
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * self.guard + 1,) * 2) if self.guard else None
        clean = [None] * len(video)  # per source frame: 255 where no person's hole is within guard px

        def clean_of(s: int) -> np.ndarray:
            if clean[s] is None:
                m = hole[s].view(np.uint8)
                clean[s] = np.where((cv2.dilate(m, kernel) if kernel is not None else m) > 0, 0, 255).astype(np.uint8)
            return clean[s]

        h, w = video.shape[1:3]
        for i, t in enumerate(targets):
            ys, xs = np.nonzero(hole[t])
            if len(ys) == 0:
                continue
            if hole[t].all():  # nothing to align on, and cv2.inpaint returns a full hole unchanged
                out[i] = EMPTY_FILL
                made[i] = True
                continue
            x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
            shift = np.array([[1.0, 0.0, -x0], [0.0, 1.0, -y0], [0.0, 0.0, 1.0]])
            to_t = np.linalg.inv(full[t])
            srcs = [s for d in range(self.step, self.reach + 1, self.step) for s in (t - d, t + d)
                    if 0 <= s < len(video) and chain[s] == chain[t]]
            samples, covered = [], []
            for s in srcs:
                m = shift @ to_t @ full[s]  # source pixels -> this frame's box
                samples.append(cv2.warpPerspective(video[s], m, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR,
                                                   borderMode=cv2.BORDER_CONSTANT))
                ok = cv2.warpPerspective(clean_of(s), m, (x1 - x0, y1 - y0), flags=cv2.INTER_NEAREST,
                                         borderMode=cv2.BORDER_CONSTANT, borderValue=0)
                covered.append(ok == 0)
            box_hole = hole[t, y0:y1, x0:x1]
            fill = np.zeros((y1 - y0, x1 - x0, 3), np.uint8)
            seen = np.zeros((y1 - y0, x1 - x0), bool)
            if samples:
                med, count = masked_temporal_median(np.stack(samples), np.stack(covered))
                seen = (count > 0) & box_hole
                fill = med
                self.aligned += len(srcs)
            frame = out[i]
            sub = frame[y0:y1, x0:x1]
            sub[seen] = fill[seen]
            rest = hole[t].copy()
            rest[y0:y1, x0:x1] &= ~seen
            if rest.any():
                self.spatial += int(rest.sum())
                spatial = cv2.inpaint(frame, rest.view(np.uint8), self.radius, self.method)
                cv2.copyTo(spatial, rest.view(np.uint8), frame)
                made[i] = rest
        return out, made
