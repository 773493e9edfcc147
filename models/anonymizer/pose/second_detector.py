"""A second, independent person detector's confirmations over each track's life (opt-in).

The landmark model (and the face-keyed detector in front of it) takes clutter for bodies: a shelf,
a motorcycle's headlight, a plastic skeleton. Found once, such a phantom is followed or held for
as long as the clutter stays, and a person who later walks into it is taken over by the same
track, so dropping whole tracks cannot remove it (docs/RESULTS.md). A whole-body detector trained
on other data saw the people of the footage measured and, but for a few cases, not that clutter
(its own blind spots: a person mostly hidden behind an object, a face in close-up; docs/RESULTS.md,
"a second detector"; a box of it that shows no body, a cat's face, is no person: yolo.py
:func:`shows_body`); what it says is used per stretch of a track, not per track:

- every ``every``-th frame where a track has a box is a sample; a sample is confirmed when a person
  box of the detector matches the track's box (:func:`confirms`); a small box the full frame cannot
  show the detector is looked at again in a crop around it;
- a run of consecutive unconfirmed samples that spans ``min_run_frames`` is dropped
  (:func:`unconfirmed_spans`); the track is split around it (:func:`split_runs`): the dropped run
  becomes a rejected raw track of its own, a kept stretch after it a new raw track.

Shorter runs are kept: a detector misses a visible person now and then, and privacy decides when
the evidence is thin. The audit still checks every output. The one detector that ships with its
weights (Ultralytics YOLO11n-pose, AGPL-3.0) is stricter than the project's licence, so the pass is
off unless ``pose4d.verify.second_detector.backend`` names it (docs/WEIGHTS.md).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from anonymask.models.anonymizer.pose.settings import SecondDetectorSettings
from anonymask.models.shared.geometry import box_cover_share, box_iou

#: frames read at a time for the samples
READ_BLOCK = 64


def confirms(box, persons: np.ndarray, settings: SecondDetectorSettings) -> bool:
    """Whether a person box matches a track's ``box``: by IoU, or as the whole body around a track on
    part of it."""
    box = np.asarray(box, np.float64)
    for p in np.asarray(persons, np.float64):
        if p[4] < settings.min_score:
            continue
        if box_iou(box, p[:4]) >= settings.min_iou:
            return True
        if box_cover_share(box, p[:4]) >= settings.min_cover and box_cover_share(p[:4], box) >= settings.min_fill:
            return True
    return False


def needs_crop(box, frame_hw: tuple[int, int], settings: SecondDetectorSettings) -> bool:
    """A box too small for the detector at its input size (a far person), looked at in a crop."""
    scale = settings.input_px / max(frame_hw)
    return (box[3] - box[1]) * scale < settings.small_px


def unconfirmed_spans(samples: list[tuple[int, bool]], first: int, last: int, min_run: int) -> list[tuple[int, int]]:
    """[a, b] frame spans of a track (life ``first``..``last``) to drop: runs of consecutive
    unconfirmed samples (``(frame, confirmed)`` in frame order) that span ``min_run`` frames. A run
    that begins at the track's first sample reaches back to its first frame, one that ends at its
    last sample on to its last frame (no confirmation was seen before or after them)."""
    spans = []
    k = 0
    while k < len(samples):
        if samples[k][1]:
            k += 1
            continue
        j = k
        while j + 1 < len(samples) and not samples[j + 1][1]:
            j += 1
        a = first if k == 0 else samples[k][0]
        b = last if j == len(samples) - 1 else samples[j][0]
        if b - a + 1 >= min_run:
            spans.append((a, b))
        k = j + 1
    return spans


def split_runs(frames: list[int], spans: list[tuple[int, int]]) -> list[tuple[list[int], bool]]:
    """A track's frames (sorted) cut into consecutive runs: (frames, dropped) in frame order."""
    runs: list[tuple[list[int], bool]] = []
    for t in frames:
        dropped = any(a <= t <= b for a, b in spans)
        if runs and runs[-1][1] == dropped:
            runs[-1][0].append(t)
        else:
            runs.append(([t], dropped))
    return runs


def sample_confirmations(tracks, read_frames, t_len: int, settings: SecondDetectorSettings,
                         detector) -> dict[int, list[tuple[int, bool]]]:
    """Per raw track (``tid``): its samples, every ``every``-th frame of the video where it has a
    box, each confirmed or not by ``detector`` (``frame(img)``, ``around(img, box)``). Tracks whose
    life is shorter than ``min_run_frames`` are not sampled: nothing of them could be dropped."""
    want: dict[int, list] = {}
    for tr in tracks:
        if not tr.frames or max(tr.frames) - min(tr.frames) + 1 < settings.min_run_frames:
            continue
        for t in sorted(tr.frames):
            if t % settings.every == 0:
                want.setdefault(t, []).append(tr)
    out: dict[int, list[tuple[int, bool]]] = {}
    times = sorted(want)
    k = 0
    while k < len(times):
        a = times[k]
        b = min(a + READ_BLOCK, t_len)
        block = read_frames(a, b)
        while k < len(times) and times[k] < b:
            t = times[k]
            img = np.asarray(block[t - a])
            persons = detector.frame(img)
            for tr in want[t]:
                box = tr.frames[t].box
                ok = confirms(box, persons, settings)
                if not ok and needs_crop(box, img.shape[:2], settings):
                    ok = confirms(box, detector.around(img, box), settings)
                out.setdefault(tr.tid, []).append((t, ok))
            k += 1
    return out


def split_unconfirmed(tracks: list, new_track: Callable[[int], object], samples: dict[int, list[tuple[int, bool]]],
                      min_run: int, relabel) -> tuple[set[int], int]:
    """Split every track of ``tracks`` (discovery's raw tracks, a list indexed by ``tid``) around its
    unconfirmed spans. The first run keeps the track's id; each later run becomes a new raw track
    (``new_track(tid)`` makes one; it is appended) and ``relabel(t, old, new)`` moves its frames'
    instance pixels to the new id. Returns the ids of the dropped runs and how many frames they hold."""
    dropped: set[int] = set()
    frames = 0
    for tr in list(tracks):
        got = samples.get(tr.tid)
        if not got:
            continue
        ts = sorted(tr.frames)
        spans = unconfirmed_spans(got, ts[0], ts[-1], min_run)
        if not spans:
            continue
        runs = split_runs(ts, spans)
        for k, (run, drop) in enumerate(runs):
            owner = tr
            if k > 0:
                owner = new_track(len(tracks))
                tracks.append(owner)
                for t in run:
                    owner.frames[t] = tr.frames.pop(t)
                    if relabel is not None:
                        relabel(t, tr.tid, owner.tid)
            if drop:
                dropped.add(owner.tid)
                frames += len(run)
    return dropped, frames

