"""People removed without an avatar ("erased"): the other half of "replace, never erase".

The detectors and the ground-truth check look for real people left *visible*. A person can also
be lost the other way: the hole (``person_hole``) removes them, but no avatar is drawn there, so
the output shows an empty scene where someone was (a close-up between two face tracks, a person
the pose model could not follow). That deletes a person from the data silently, which the product
promises not to do. Here every connected region of the hole is checked for avatar pixels: a region
at least ``min_share`` of the video's typical hole (the median per-frame hole area, i.e. about a
person) with (almost) no avatar pixel on or near it is an erased person in that frame. Small
regions without an avatar (a sliver of someone entering behind a tree, a detached fringe of a
mask) are counted in ``largest`` but are not findings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import cv2
import numpy as np

from anonymask.models.anonymizer.audit.detectors import AuditFinding


@dataclass
class ErasedScan:
    """Uncovered hole regions of a video: (frame, area px, box, share of avatar pixels near it)."""

    regions: list[tuple[int, int, list[float], float]] = field(default_factory=list)
    hole_areas: list[int] = field(default_factory=list)

    @property
    def typical(self) -> float:
        """Median hole area over the frames that have a hole (about one to a few people)."""
        a = [x for x in self.hole_areas if x > 0]
        return float(np.median(a)) if a else 0.0

    def relative(self) -> list[float]:
        t = self.typical
        return [r[1] / t for r in self.regions] if t > 0 else []

    def largest(self) -> float:
        """The largest uncovered region as a share of the typical hole (0 when none)."""
        return max(self.relative(), default=0.0)

    def finding(self, min_share: float) -> AuditFinding | None:
        rel = self.relative()
        hits = [r for r, s in zip(self.regions, rel) if s >= min_share]
        if not hits:
            return None
        first = hits[0]
        return AuditFinding("erased", sorted({r[0] for r in hits}), first[2], float(max(rel)), 1.0 - first[3])


def scan_erased(chunks: Iterable[tuple[int, np.ndarray, np.ndarray]], *, avatar_grow: int = 3,
                max_covered: float = 0.05) -> ErasedScan:
    """``chunks`` yields (t0, hole (n,H,W), avatar mask (n,H,W)) blocks. A hole region is
    uncovered when at most ``max_covered`` of its pixels lie on the avatar grown by ``avatar_grow``."""
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * avatar_grow + 1,) * 2)
    out = ErasedScan()
    for t0, holes, avatars in chunks:
        for k in range(len(holes)):
            hole = np.asarray(holes[k]).astype(np.uint8)
            out.hole_areas.append(int(hole.sum()))
            if not hole.any():
                continue
            near = cv2.dilate(np.asarray(avatars[k]).astype(np.uint8), kernel).astype(bool)
            n, lab, stats, _ = cv2.connectedComponentsWithStats(hole, connectivity=8)
            for c in range(1, n):
                covered = float(near[lab == c].mean())
                if covered <= max_covered:
                    x, y, w, h, area = (int(v) for v in stats[c])
                    out.regions.append((t0 + k, area, [float(x), float(y), float(x + w), float(y + h)], covered))
    return out
