"""One person seen as two tracks: link a track that ends inside the frame to one that starts later.

The online tracker lets a track die after ``max_gap`` missed frames. A person who walks behind an
occluder (a counter, a pillar, another person) for longer is found again later as a new track;
in between they are partly visible (a head above the counter) but neither track covers them, so
their visible part stays in the output. After discovery, a track A that ends inside the frame (it
did not leave) is linked to a track B that starts inside the frame (it did not enter) after it,
within ``settings.gap`` frames (or in the very frame A ends, when their boxes there overlap: the
tracker lost the person and found them again at once), when B's first box is where A could have walked to (centre distance
<= ``slack`` + ``speed`` x gap, in person heights) and both boxes have about the same size: their
heights or their diagonals within ``max_ratio`` (a pose changes one or the other: a man curled up
in a flip has a box half as tall as when he lands, its diagonal 0.76x; a kick
widens the box, its height stays). The
linked gap is bridged by interpolated boxes (removed as boxes, the avatar stays), exactly as the
short gaps of one track are. Linking is greedy by distance, one successor per track, so chains
A -> B -> C form. Two different people can be linked only if one vanishes mid-frame where the
other appears: then the area between them is removed as well, which costs background, not privacy.

A track B that begins on someone already followed (another track C, seen in each of B's first
``taken_frames`` frames, whose box overlaps B's there with a mean IoU >= ``taken_iou``) is C found a
second time, or C's own continuation, not A come back: it is linked to nobody before it. Linking
it drew a second avatar of C, and removed the boxes interpolated between A's end and B's start,
over frames where C was followed all along (a short second body on a walker, found at the start,
linked to the walker's own later track: docs/RESULTS.md). C's track removes and replaces that
person there; A and B keep their own holds (models/anonymizer/pose/bridge.py).
"""

from __future__ import annotations

import numpy as np

from anonymask.models.anonymizer.pose.settings import LinkSettings
from anonymask.models.shared.geometry import box_iou, inside_frame


def _diagonal(box: np.ndarray) -> float:
    return float(np.hypot(box[2] - box[0], box[3] - box[1]))


def _ratio(a: float, b: float) -> float:
    return max(a, b) / max(min(a, b), 1e-6)


def _begins_on_someone(boxes: list[np.ndarray], b: int, settings: LinkSettings) -> bool:
    """One other track is seen in each of track ``b``'s first ``taken_frames`` frames, its box
    overlapping b's there with a mean IoU >= ``taken_iou``."""
    own = boxes[b]
    first = np.flatnonzero(np.isfinite(own[:, 0]))[: settings.taken_frames]
    if first.size == 0:
        return False
    mine = own[first]
    for c, other in enumerate(boxes):
        if c == b:
            continue
        theirs = other[first]
        if np.isfinite(theirs[:, 0]).all() and np.mean([box_iou(m, o) for m, o in zip(mine, theirs)]) >= \
                settings.taken_iou:
            return True
    return False


def begun_on_someone(boxes: list[np.ndarray], settings: LinkSettings) -> set[int]:
    """The late tracks (first seen after frame 0) that begin on someone already followed: linked to
    nobody before them."""
    out = set()
    for b, own in enumerate(boxes):
        seen = np.flatnonzero(np.isfinite(own[:, 0]))
        if seen.size and seen[0] > 0 and _begins_on_someone(boxes, b, settings):
            out.add(b)
    return out


def link_tracks(boxes: list[np.ndarray], hw: tuple[int, int], settings: LinkSettings) -> list[list[int]]:
    """``boxes``: per raw track (T,4) boxes, NaN where not seen. Returns groups of raw track
    indices (in time order), every index in exactly one group."""
    return link_groups(boxes, hw, settings, begun_on_someone(boxes, settings))


def link_groups(boxes: list[np.ndarray], hw: tuple[int, int], settings: LinkSettings,
                taken: set[int]) -> list[list[int]]:
    """:func:`link_tracks` with the late tracks that begin on someone (:func:`begun_on_someone`)
    already known: they are linked to nobody before them."""
    max_link, edge, speed, slack, max_ratio = settings.gap, settings.edge, settings.speed, settings.slack, \
        settings.max_ratio
    spans = []
    for b in boxes:
        seen = np.nonzero(np.isfinite(b[:, 0]))[0]
        spans.append((int(seen[0]), int(seen[-1])) if seen.size else None)
    cand = []
    for a, sa in enumerate(spans):
        if sa is None or not inside_frame(boxes[a][sa[1]], hw, edge):
            continue
        ba = boxes[a][sa[1]]
        for b, sb in enumerate(spans):
            if b == a or sb is None or b in taken:
                continue
            gap = sb[0] - sa[1]
            if gap < 0 or gap > max_link or sb[1] <= sa[1]:
                continue
            bb = boxes[b][sb[0]]
            if gap == 0 and box_iou(ba, bb) < settings.handover_iou:
                continue  # a hand-over in one frame: the same person there, or no link
            if not inside_frame(bb, hw, edge):
                continue
            ha, hb = float(ba[3] - ba[1]), float(bb[3] - bb[1])
            if min(ha, hb) <= 0 or not (_ratio(ha, hb) <= max_ratio or _ratio(_diagonal(ba), _diagonal(bb)) <= max_ratio):
                continue
            size = (ha + hb) / 2
            dist = float(np.hypot((bb[0] + bb[2] - ba[0] - ba[2]) / 2, (bb[1] + bb[3] - ba[1] - ba[3]) / 2)) / size
            if dist <= slack + speed * gap:
                cand.append((dist, a, b))
    succ, pred = {}, {}
    for _, a, b in sorted(cand):
        if a in succ or b in pred:
            continue
        succ[a], pred[b] = b, a
    groups = []
    for i in range(len(boxes)):
        if i in pred:
            continue
        chain = [i]
        while chain[-1] in succ:
            chain.append(succ[chain[-1]])
        groups.append(chain)
    return groups
