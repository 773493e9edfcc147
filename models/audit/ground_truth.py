"""The audit's oracle on synthetic data: real person pixels shown in the output, from ground truth.

Where a video comes with its ground-truth person masks and clean background (the synthetic
generator's data), the audit does not need a detector to know whether a person is left visible:
a person pixel that differs from the background (it shows the person) and that the output still
shows unchanged (and closer to the person than to the background), outside avatar pixels, is a
leaked pixel (the definition of ``real_leak``, models/metrics.py). The video fails when the
leaked share exceeds ``max_leak``; the frames with at least ``min_pixels`` leaked pixels are named
(or, when the leak is spread thin, every frame with a leaked pixel). This measures the detectors' recall too: the
detector findings of the same video are compared with it (``audit_*`` metrics).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from anonymask.models.audit.detectors import AuditFinding
from anonymask.models.metrics import leak_flags


def leaked_pixels(raw: np.ndarray, out: np.ndarray, person: np.ndarray, background: np.ndarray,
                  synthetic: np.ndarray, tol: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """Per frame of a chunk: (leaked (n,H,W) bool, distinguishable (n,H,W) bool). Only the
    person's pixels are compared (a few percent of the frame; comparing whole frames cost the
    audit a third of its time on the 640x480 bench)."""
    idx = np.nonzero(person)
    bg = np.asarray(background)
    leak_v, dist_v = leak_flags(raw[idx], out[idx], bg[idx[1], idx[2]] if bg.ndim == 3 else bg[idx], tol,
                                synthetic[idx])
    leaked, dist = np.zeros(person.shape, bool), np.zeros(person.shape, bool)
    leaked[idx], dist[idx] = leak_v, dist_v
    return leaked, dist


def gt_leak(chunks: Iterable[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]], *,
            max_leak: float = 0.001, min_pixels: int = 10) -> tuple[float, AuditFinding | None]:
    """``chunks`` yields (t0, raw, out, person mask, background, synthetic mask) blocks of frames.
    Returns (leaked share over the video, a finding when it exceeds ``max_leak``)."""
    leaked = total = 0
    frames: list[int] = []
    thin: list[int] = []
    box = thin_box = None
    for t0, raw, out, person, bg, syn in chunks:
        lk, dist = leaked_pixels(raw, out, person.astype(bool), bg, syn.astype(bool))
        leaked += int(lk.sum())
        total += int(dist.sum())
        for k in range(len(lk)):
            if lk[k].any():
                thin.append(t0 + k)
                if thin_box is None:
                    ys, xs = np.nonzero(lk[k])
                    thin_box = [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]
            if int(lk[k].sum()) >= min_pixels:
                frames.append(t0 + k)
                if box is None:
                    ys, xs = np.nonzero(lk[k])
                    box = [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]
    share = leaked / total if total else 0.0
    if share > max_leak:
        if not frames:
            frames, box = thin, thin_box
        return share, AuditFinding("gt_leak", frames, box or [0.0, 0.0, 0.0, 0.0], float(share), 1.0)
    return share, None
