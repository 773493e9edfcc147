"""Background inpainting backends: remove the people (mask q) from a video.

``get_inpainter(name, **cfg).inpaint(video (T,H,W,3) uint8, mask (T,H,W)) -> (T,H,W,3) uint8``.
The hole is every pixel the mask covers at all (alpha > 0). Outside the hole the output is the
input frame, bit for bit, so lighting changes and everything that is not a person are kept.

Made-up pixels. A backend with ``fill(video, mask) -> (frames, made_up (T,H,W) bool)`` also says
which hole pixels it made up: their colour was computed by a spatial fill (``cv2.inpaint``
diffusing the colours around the region inwards, or the flat ``EMPTY_FILL``) because no frame it
may draw from shows that place without a person. Such a pixel holds no real pixel of any frame,
only a smooth continuation of the real pixels at the region's rim, so a face or body a detector
sees there is the fill's, not a person's (the audit counts them as drawn, like avatar pixels:
models/anonymizer/audit/detectors.py). Pixels copied from other frames (the temporal or aligned
median) are real pixels and are never marked. A backend without ``fill`` (ProPainter's learned
fill) marks nothing.

- ``temporal_median`` (static cameras): per pixel, the median over the frames where that pixel is
  NOT in the hole (outside every person's mask), so a person can never be copied back into the
  hole, not even one who stands still (their pixels are in the hole in every frame). Pixels
  uncovered in fewer than ``min_support`` frames (5) are filled by OpenCV inpainting of that
  median background image: a part of a person the mask missed for a frame or two is no background. Over long
  videos (``inpaint_stream``) the median is taken per window of frames (+ context), pixels a
  window never uncovers take the median of a bounded sample of frames from the whole video.
- ``opencv`` (moving cameras, or a fallback): ``cv2.inpaint`` on every frame independently.
- ``propainter`` (GPU users, weights from ``$ANONYMASK_WEIGHTS/propainter``): ProPainter's flow
  completion + propagation + video transformer (models/anonymizer/inpaint/propainter.py).
"""

from __future__ import annotations

from typing import Annotated, Protocol

import cv2
import numpy as np
from pydantic import Field

from anonymask.core.registry import build, names, register
from anonymask.models.anonymizer.segment.masks import as_bool


class Inpainter(Protocol):
    def inpaint(self, video: np.ndarray, mask: np.ndarray) -> np.ndarray: ...


_METHODS = {"telea": cv2.INPAINT_TELEA, "ns": cv2.INPAINT_NS}

#: the fill where nothing around a hole was ever seen (a frame or shot that is all hole):
#: ``cv2.inpaint`` has no pixel to start from there and returns its input unchanged
EMPTY_FILL = 128




def available_inpainters() -> list[str]:
    return names("inpaint")


def get_inpainter(name: str, **cfg) -> Inpainter:
    """The inpainter registered as ``name`` (core/registry.py), settings validated."""
    return build("inpaint", name, **cfg)


def _check(video: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    video = np.asarray(video)
    if video.ndim != 4 or video.shape[-1] != 3 or video.dtype != np.uint8:
        raise ValueError(f"video must be (T,H,W,3) uint8, got {video.shape} {video.dtype}")
    hole = as_bool(mask)
    if hole.shape != video.shape[:3]:
        raise ValueError(f"mask {hole.shape} does not match video {video.shape[:3]}")
    return video, hole


def _method(name: str) -> int:
    try:
        return _METHODS[name.lower()]
    except KeyError:
        raise ValueError(f"inpainting method must be one of {sorted(_METHODS)}, got {name!r}") from None


def masked_temporal_median(
    video: np.ndarray, hole: np.ndarray, block_rows: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel median over the frames where the pixel is outside ``hole``.

    Returns (background (H,W,3) uint8, count (H,W) int32 of uncovered frames; background is 0
    where count is 0). Even counts give the rounded mean of the two middle values.

    Works on blocks of rows with time as the last, contiguous axis, so memory stays at about
    T*block_rows*W*3 bytes. Covered samples are set to 255 before sorting: they sort after (or tie
    with) every real sample, so the first ``count`` sorted values are exactly the uncovered ones.
    uint8 is sorted with numpy's radix sort (``kind="stable"``), linear in T.
    """
    video, hole = _check(video, hole)
    t_len, h, w, _ = video.shape
    background = np.zeros((h, w, 3), np.uint8)
    count = np.empty((h, w), np.int32)
    for r0 in range(0, h, block_rows):
        r1 = min(h, r0 + block_rows)
        rows = r1 - r0
        # (T, rows*W*3) -> (rows*W*3, T): cv2.transpose is a blocked transpose (faster than numpy's).
        samples = cv2.transpose(np.ascontiguousarray(video[:, r0:r1]).reshape(t_len, -1))
        covered = cv2.transpose(np.ascontiguousarray(hole[:, r0:r1]).view(np.uint8).reshape(t_len, -1))
        samples = samples.reshape(rows * w, 3, t_len)
        covered = covered.reshape(rows * w, 1, t_len)
        np.maximum(samples, covered * np.uint8(255), out=samples)
        samples.sort(axis=-1, kind="stable")
        n = t_len - covered[:, 0, :].sum(axis=-1, dtype=np.int32)
        lo = np.maximum((n - 1) // 2, 0)
        hi = np.maximum(n // 2, 0)
        v_lo = np.take_along_axis(samples, np.broadcast_to(lo[:, None, None], (rows * w, 3, 1)), -1)[..., 0]
        v_hi = np.take_along_axis(samples, np.broadcast_to(hi[:, None, None], (rows * w, 3, 1)), -1)[..., 0]
        med = ((v_lo.astype(np.uint16) + v_hi + 1) // 2).astype(np.uint8)
        med[n == 0] = 0
        background[r0:r1] = med.reshape(rows, w, 3)
        count[r0:r1] = n.reshape(rows, w)
    return background, count


@register("inpaint", "temporal_median")
class TemporalMedianInpainter:
    """Static-camera background: masked temporal median + OpenCV fill of never-seen pixels.

    Output = where(hole, background, frame): only hole pixels change. A hole pixel's median needs
    ``min_support`` uncovered frames: a pixel uncovered in fewer is filled spatially, as a
    never-seen one. Those few frames are mostly where the mask missed a part of the person (a
    still man's shoe, a leg out of the mask for a frame or two), and their median put that part
    back into every frame of the hole (docs/RESULTS.md, search ``min_support``, has the leaked
    pixels with 1 and with 5).
    ``grow_unseen`` dilates that region before filling, so the fill does not start from a pixel
    next to it (often a mask edge that still holds some person colour).
    ``source_margin`` (px, 0: off): a pixel within this distance of a frame's hole is not a sample
    of the median in that frame. Where a person stands long in one place, the pixels just outside
    their mask are often theirs (a shoe's edge the margin missed, frame after frame), and the median
    of a window then copied them into the hole of every frame (docs/RESULTS.md, search
    ``source_margin``). Only what is taken from changes: the hole pasted is the hole.
    """

    #: a pixel must show the same place in every frame (tasks/inpaint.py swaps the backend for
    #: shots whose camera moves)
    still_camera = True

    def __init__(
        self,
        method: str = "telea",
        radius: int = 5,
        block_rows: int = 32,
        grow_unseen: Annotated[int, Field(ge=0)] = 5,
        min_support: Annotated[int, Field(ge=1)] = 5,
        source_margin: Annotated[int, Field(ge=0)] = 0,
    ):
        self.method = _method(method)
        self.radius = int(radius)
        self.block_rows = int(block_rows)
        self.grow_unseen = int(grow_unseen)
        self.min_support = max(1, int(min_support))
        self.source_margin = int(source_margin)

    def sources_hidden(self, hole: np.ndarray) -> np.ndarray:
        """(T,H,W) bool: the pixels not taken as samples: the hole grown by ``source_margin``."""
        if self.source_margin <= 0:
            return hole
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * self.source_margin + 1,) * 2)
        return np.stack([cv2.dilate(f.astype(np.uint8), k).astype(bool) for f in hole])

    def background(self, video: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The clip's static background image (H,W,3) uint8 and where it is made up (H,W) bool."""
        video, hole = _check(video, mask)
        bg, count = masked_temporal_median(video, self.sources_hidden(hole), self.block_rows)
        return self._fill_unseen(bg, count < self.min_support)

    def inpaint(self, video: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.fill(video, mask)[0]

    def fill(self, video: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inpainted frames and the hole pixels made up (module docstring)."""
        video, hole = _check(video, mask)
        bg, made = self.background(video, hole)
        return _paste(video, hole, bg), hole & made

    def _fill_unseen(self, bg: np.ndarray, unseen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``bg`` with its ``unseen`` pixels (grown by ``grow_unseen``) filled spatially, and the
        pixels that fill wrote."""
        if not unseen.any():
            return bg, np.zeros(bg.shape[:2], bool)
        if unseen.all():  # a shot that is all hole in every frame (a close-up): nothing to fill from
            return np.full_like(bg, EMPTY_FILL), np.ones(bg.shape[:2], bool)
        fill = unseen.view(np.uint8)
        if self.grow_unseen > 0:
            k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * self.grow_unseen + 1,) * 2)
            fill = cv2.dilate(fill, k)
        return cv2.inpaint(bg, fill, self.radius, self.method), fill.astype(bool)

    def inpaint_stream(self, read, t_len: int, write, window: int = 64, context: int = 16,
                       sample_frames: int = 96) -> None:
        """Streamed inpainting with memory bounded by ``window + 2*context`` frames.

        ``read(a, b)`` -> (video (b-a,H,W,3) uint8, hole (b-a,H,W)); ``write(t0, frames, made_up)``.
        Each window's background is the masked median of its frames and context; a pixel that is
        uncovered in fewer than ``min_support`` of them takes the masked median of up to
        ``sample_frames`` frames spread over the whole video, and one that is not uncovered often
        enough there either is filled spatially.
        """
        if t_len <= window + 2 * context:
            video, hole = read(0, t_len)
            write(0, *self.fill(video, hole))
            return
        idx = np.unique(np.linspace(0, t_len - 1, min(sample_frames, t_len)).round().astype(int))
        picks = [read(int(t), int(t) + 1) for t in idx]
        g_bg, g_count = masked_temporal_median(np.concatenate([p[0] for p in picks]),
                                               self.sources_hidden(np.concatenate([as_bool(p[1]) for p in picks])),
                                               self.block_rows)
        del picks
        for t0 in range(0, t_len, window):
            t1 = min(t_len, t0 + window)
            a0, a1 = max(0, t0 - context), min(t_len, t1 + context)
            video, hole = _check(*read(a0, a1))
            bg, count = masked_temporal_median(video, self.sources_hidden(hole), self.block_rows)
            local_unseen = count < self.min_support
            bg[local_unseen] = g_bg[local_unseen]
            bg, made = self._fill_unseen(bg, local_unseen & (g_count < self.min_support))
            own = hole[t0 - a0 : t1 - a0]
            write(t0, _paste(video[t0 - a0 : t1 - a0], own, bg), own & made)


def _paste(video: np.ndarray, hole: np.ndarray, bg: np.ndarray) -> np.ndarray:
    out = video.copy()
    for t in range(video.shape[0]):
        # masked copy per frame: several times faster than np.where over a broadcast channel axis
        cv2.copyTo(bg, hole[t].view(np.uint8), out[t])
    return out


def inpaint_stream(inpainter, read, t_len: int, write, window: int = 64, **stream) -> None:
    """Any backend over a long video: its own ``inpaint_stream`` (with the ``stream`` settings,
    e.g. ``context``, ``sample_frames``) or window by window. ``write(t0, frames, made_up)``:
    ``made_up`` (T,H,W) bool, or None from a backend that does not say (module docstring)."""
    if hasattr(inpainter, "inpaint_stream"):
        inpainter.inpaint_stream(read, t_len, write, window=window, **stream)
        return
    for t0 in range(0, t_len, window):
        video, hole = read(t0, min(t_len, t0 + window))
        if hasattr(inpainter, "fill"):
            write(t0, *inpainter.fill(video, hole))
        else:
            write(t0, inpainter.inpaint(video, hole), None)


@register("inpaint", "opencv")
class OpenCVInpainter:
    """Frame-by-frame ``cv2.inpaint`` (TELEA or NS): no temporal information, works with camera motion."""

    def __init__(self, method: str = "telea", radius: int = 5):
        self.method = _method(method)
        self.radius = int(radius)

    def inpaint(self, video: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.fill(video, mask)[0]

    def fill(self, video: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inpainted frames; every hole pixel is made up (a spatial fill of each frame)."""
        video, hole = _check(video, mask)
        out = video.copy()
        for t in range(video.shape[0]):
            if hole[t].all():  # cv2.inpaint would return the frame as it was, people included
                out[t] = EMPTY_FILL
            elif hole[t].any():
                filled = cv2.inpaint(video[t], hole[t].view(np.uint8), self.radius, self.method)
                # take only hole pixels from the fill: outside it the frame stays bit for bit
                cv2.copyTo(filled, hole[t].view(np.uint8), out[t])
        return out, hole.copy()
