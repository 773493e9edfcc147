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
  show the detector is looked at again in a crop around it (:func:`crop_verdict`: a crop box lying on
  a person the full frame gave another track is that person's, not the track's own);
- a run of consecutive unconfirmed samples that spans ``min_run_frames`` is dropped
  (:func:`unconfirmed_spans`); the track is split around it (:func:`split_runs`): the dropped run
  becomes a rejected raw track of its own, a kept stretch after it a new raw track.

- one person box is one person: in each sample the box goes to the track it matches best
  (:func:`claim_boxes`); a track seen only inside a box another track has taken is a part of that
  person's body (a body the landmark model drew on her legs, or a track still on her after another
  took her over), and where that lasts ``part_min_samples`` samples between two of its own
  (:func:`part_spans`) its avatar yields: it is not drawn, its pixels stay removed (estimate.py
  ``yield_parts``).

Shorter runs are kept: a detector misses a visible person now and then, and privacy decides when
the evidence is thin. The audit still checks every output. The one detector that ships with its
weights (Ultralytics YOLO11n-pose, AGPL-3.0) is stricter than the project's licence, so the pass is
off unless ``pose4d.verify.second_detector.backend`` names it (docs/WEIGHTS.md).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from anonymask.models.anonymizer.pose.settings import SecondDetectorSettings
from anonymask.models.anonymizer.pose.yolo import PERSON_COLUMNS
from anonymask.models.shared.geometry import box_cover_share, box_iou

#: frames read at a time for the samples
READ_BLOCK = 64


#: a sample's verdict: no person box matches the track; one does and it is the track's own; one
#: does, but another track matches it better (the track is a part of that person)
UNSEEN, OWN, PART = 0, 1, 2


def matches(box, person: np.ndarray, settings: SecondDetectorSettings) -> bool:
    """Whether one person box (x0, y0, x1, y1, score) matches a track's ``box``: by IoU, or as the
    whole body around a track on part of it."""
    if person[4] < settings.min_score:
        return False
    if box_iou(box, person[:4]) >= settings.min_iou:
        return True
    return box_cover_share(box, person[:4]) >= settings.min_cover and box_cover_share(person[:4], box) >= settings.min_fill


def confirms(box, persons: np.ndarray, settings: SecondDetectorSettings) -> bool:
    """Whether any person box matches a track's ``box`` (:func:`matches`)."""
    box = np.asarray(box, np.float64)
    return any(matches(box, p, settings) for p in np.asarray(persons, np.float64))


def claim_boxes(boxes: list, persons: np.ndarray, settings: SecondDetectorSettings) -> list[int]:
    """One frame's verdict for each track box (:data:`UNSEEN`, :data:`OWN`, :data:`PART`); see
    :func:`claims`."""
    return claims(boxes, persons, settings)[0]


def claims(boxes: list, persons: np.ndarray, settings: SecondDetectorSettings) -> tuple[list[int], np.ndarray]:
    """One frame's verdict for each track box, and the person boxes taken (k, 4). A person box is
    one person: the matching pairs are taken in order of IoU, each box by one track; a track that
    matches only boxes already taken is a part of someone (two tracks on one body: the IoU of the
    whole body's track is the higher)."""
    persons = np.asarray(persons, np.float64).reshape(-1, PERSON_COLUMNS)
    boxes = [np.asarray(b, np.float64) for b in boxes]
    pairs = sorted(((box_iou(b, p[:4]), i, j) for i, b in enumerate(boxes) for j, p in enumerate(persons)
                    if matches(b, p, settings)), reverse=True)
    out = [UNSEEN] * len(boxes)
    taken: list[int] = []
    for _, i, j in pairs:
        if out[i] == OWN:
            continue
        if j in taken:
            out[i] = PART  # (its own box may still come: a free one it matches less well)
            continue
        out[i] = OWN
        taken.append(j)
    return out, persons[taken, :4]


def crop_verdict(box, crop_persons: np.ndarray, taken: np.ndarray, settings: SecondDetectorSettings) -> int:
    """The verdict of a small track box that no full-frame person box matched, from the person boxes
    of a crop around it (:meth:`around`, frame pixels): :data:`OWN` where a crop box matches it and
    lies outside the person boxes other tracks took in the full frame; :data:`PART` where every
    matching crop box lies on such a box by ``crop_taken_share`` of its area or more (zoomed, the
    detector boxes clutter together with the legs of the person beside it: the crop cannot tell
    that from the person the full frame already boxed, so it is no box of the track's own);
    :data:`UNSEEN` where none matches."""
    box = np.asarray(box, np.float64)
    found = [p for p in np.asarray(crop_persons, np.float64).reshape(-1, PERSON_COLUMNS) if matches(box, p, settings)]
    if not found:
        return UNSEEN
    taken = np.asarray(taken, np.float64).reshape(-1, 4)
    own = any(not len(taken) or float(box_cover_share(p[:4], taken).max()) < settings.crop_taken_share for p in found)
    return OWN if own else PART


def needs_crop(box, frame_hw: tuple[int, int], settings: SecondDetectorSettings) -> bool:
    """A box too small for the detector at its input size (a far person), looked at in a crop."""
    scale = settings.input_px / max(frame_hw)
    return (box[3] - box[1]) * scale < settings.small_px


def _runs(samples: list[tuple[int, int]], first: int, last: int, hit: Callable[[int], bool]):
    """(a, b, the run's samples) of each run of consecutive samples whose verdict is a ``hit``, in
    frame order; a run that begins at the track's first sample reaches back to its first frame
    (``first``), one that ends at its last sample on to its last frame (``last``): nothing else was
    seen before or after."""
    k = 0
    while k < len(samples):
        if not hit(samples[k][1]):
            k += 1
            continue
        j = k
        while j + 1 < len(samples) and hit(samples[j + 1][1]):
            j += 1
        yield (first if k == 0 else samples[k][0]), (last if j == len(samples) - 1 else samples[j][0]), samples[k:j + 1]
        k = j + 1


def unconfirmed_spans(samples: list[tuple[int, int]], first: int, last: int, min_run: int) -> list[tuple[int, int]]:
    """[a, b] frame spans of a track (life ``first``..``last``) to drop: runs of consecutive
    unconfirmed samples (``(frame, verdict)`` in frame order; a false verdict is unconfirmed) that
    span ``min_run`` frames."""
    return [(a, b) for a, b, _ in _runs(samples, first, last, lambda v: not v) if b - a + 1 >= min_run]


def part_spans(samples: list[tuple[int, int]], first: int, last: int, min_samples: int) -> list[tuple[int, int]]:
    """[a, b] frame spans of a track where it is a part of someone else's body: runs of samples with
    no box of the track's own (:data:`PART` or :data:`UNSEEN`, none :data:`OWN`) that hold at least
    ``min_samples`` :data:`PART` samples. Between two samples where the detector gives the track a
    person of its own, a missed sample says nothing either way, so it neither breaks the run nor
    counts towards it (clutter beside a person is boxed with them now and then, and missed between)."""
    return [(a, b) for a, b, run in _runs(samples, first, last, lambda v: v != OWN)
            if sum(v == PART for _, v in run) >= min_samples]


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
                         detector) -> dict[int, list[tuple[int, int]]]:
    """Per raw track (``tid``): its samples, every ``every``-th frame of the video where it has a
    box, each with its verdict (:func:`claim_boxes` over the tracks of that frame) from ``detector``
    (``frame(img)``, ``around(img, box)``). Every track is sampled, a short one too: nothing of it can
    be dropped, but it may be the person another track is a part of, or a part itself."""
    want: dict[int, list] = {}
    for tr in tracks:
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
            here = want[t]
            verdicts, taken = claims([tr.frames[t].box for tr in here], detector.frame(img), settings)
            for tr, v in zip(here, verdicts):
                box = tr.frames[t].box
                if v == UNSEEN and needs_crop(box, img.shape[:2], settings):
                    # a far person the full frame is too small for, or clutter beside someone it boxed
                    v = crop_verdict(box, detector.around(img, box), taken, settings)
                out.setdefault(tr.tid, []).append((t, v))
            k += 1
    return out


def split_unconfirmed(tracks: list, new_track: Callable[[int], object], samples: dict[int, list[tuple[int, int]]],
                      min_run: int, relabel) -> tuple[set[int], int]:
    """Split every track of ``tracks`` (discovery's raw tracks, a list indexed by ``tid``) around its
    unconfirmed spans. The first run keeps the track's id; each later run becomes a new raw track
    (``new_track(tid)`` makes one; it is appended) and ``relabel(t, old, new)`` moves its frames'
    instance pixels to the new id; ``samples`` are moved with their frames (in place: keyed by the
    ids after the split). Returns the ids of the dropped runs and how many frames they hold."""
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
                lo, hi = run[0], run[-1]
                samples[owner.tid] = [s for s in samples[tr.tid] if lo <= s[0] <= hi]
                samples[tr.tid] = [s for s in samples[tr.tid] if not lo <= s[0] <= hi]
            if drop:
                dropped.add(owner.tid)
                frames += len(run)
    return dropped, frames

