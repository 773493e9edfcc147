"""The audit's oracle on synthetic data: real person pixels shown in the output, from ground truth.

Where a video comes with its ground-truth person masks and clean background (the synthetic
generator's data), the audit does not need a detector to know whether a person is left visible:
a person pixel that differs from the background (it shows the person) and that the output still
shows unchanged (and closer to the person than to the background), outside avatar pixels, is a
leaked pixel (the definition of ``real_leak``, models/anonymizer/metrics.py), unless it is a hole pixel
whose fill is the same without the person (``fill_coincident``, tasks/inpaint.py): a fill that
matches their colour by chance. The video fails when the
leaked share exceeds ``max_leak``; the frames with at least ``min_pixels`` leaked pixels are named
(or, when the leak is spread thin, every frame with a leaked pixel). This measures the detectors' recall too: the
detector findings of the same video are compared with it (``audit_*`` metrics).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from anonymask.models.anonymizer.audit.detectors import AuditFinding
from anonymask.models.anonymizer.metrics import leak_flags


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


class GtLeak(NamedTuple):
    share: float  # leaked share of the distinguishable person pixels (coincident fill not counted)
    finding: AuditFinding | None  # when ``share`` exceeds the allowed leak
    coincident: float  # share of them that look leaked, but whose fill is the same without the person


def gt_leak(chunks: Iterable[tuple], *, max_leak: float = 0.001, min_pixels: int = 10,
            strict: bool = False) -> GtLeak:
    """``chunks`` yields (t0, raw, out, person mask, background, synthetic mask[, coincident])
    blocks of frames. ``coincident`` (optional, the inpaint stage's ``fill_coincident``): hole
    pixels whose fill is the same when the video's people are replaced by the clean background. A
    fill can match a person's colour by chance without having seen them (a smooth fill between
    grey trousers and a grey floor); such a pixel shows nothing of the person and is not counted,
    unless ``strict`` (every changed pixel counts, whatever its fill)."""
    leaked = total = excused = 0
    frames: list[int] = []
    thin: list[int] = []
    box = thin_box = None
    for t0, raw, out, person, bg, syn, *rest in chunks:
        lk, dist = leaked_pixels(raw, out, person.astype(bool), bg, syn.astype(bool))
        if rest and rest[0] is not None:
            same = lk & np.asarray(rest[0], bool)
            excused += int(same.sum())
            if not strict:
                lk &= ~same
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
    coincident = excused / total if total else 0.0
    if share > max_leak:
        if not frames:
            frames, box = thin, thin_box
        return GtLeak(share, AuditFinding("gt_leak", frames, box or [0.0, 0.0, 0.0, 0.0], float(share), 1.0),
                      coincident)
    return GtLeak(share, None, coincident)
