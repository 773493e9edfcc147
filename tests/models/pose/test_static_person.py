"""The man standing still by the motorcycle in the demo video s04s03_a04_r01 (issue 8, "every real
person replaced"): about 20x94 px in a 256x192 frame, in front of a large red motorcycle. The
face-keyed detector and HOG never see him; the landmark model does on a region of his size, but
the regions it predicts from there grow onto the motorcycle and its flag falls. The frames are
rendered here by the seeded synthetic generator (the same plan, identities and seed as
``python -m anonymask.models.shared.synthetic``), so the test needs no files."""

from functools import lru_cache

import numpy as np
import pytest

from anonymask.models.anonymizer.pose.people import BODY_LANDMARKS

VIDEO = "s04s03_a04_r01"


@lru_cache(maxsize=1)
def _render():
    from anonymask.models.shared.synthetic.actions import action_spec
    from anonymask.models.shared.synthetic.generator import DEMO_PRESET, plan_videos, render_video
    from anonymask.models.shared.synthetic.identities import make_identities

    plan = next(p for p in plan_videos(DEMO_PRESET, 0) if p.video_id == VIDEO)
    ids = {i.subject_id: i for i in make_identities(DEMO_PRESET.n_subjects, 0)}
    classes = [action_spec(a).name for a in DEMO_PRESET.actions]
    return render_video(plan, ids, DEMO_PRESET, 0, classes)


@pytest.fixture(scope="module")
def video(body):
    frames, gt = _render()
    masks = gt["person_masks"]  # (T, people, H, W)
    # the person who stands still: the one whose mask moves least
    still = int(np.argmin([np.abs(np.diff(masks[:, k].astype(np.int8), axis=0)).sum() for k in range(masks.shape[1])]))
    return frames, masks[:, still]


def _on(d, mask) -> bool:
    """The detection is the person of ``mask``: most of its confident body landmarks lie on the
    person's mask (grown by 3 px), and its box holds >= 90% of the person's pixels."""
    import cv2

    grown = cv2.dilate(mask.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
    idx = [i for i in BODY_LANDMARKS if d.conf[i] >= 0.5]
    h, w = mask.shape
    pts = np.clip(np.round(d.kp2d[idx]).astype(int), 0, [w - 1, h - 1])
    on = grown[pts[:, 1], pts[:, 0]].mean() if idx else 0.0
    ys, xs = np.nonzero(mask)
    x0, y0, x1, y1 = d.box
    inside = ((xs >= x0 - 1) & (xs <= x1 + 1) & (ys >= y0 - 1) & (ys <= y1 + 1)).mean()
    return bool(on >= 0.6 and inside >= 0.9)


def test_the_generator_renders_a_small_person_who_stands_still(video):
    frames, mask = video
    assert frames.shape[1:] == (192, 256, 3)
    ys, xs = np.nonzero(mask[0])
    assert 80 <= ys.max() - ys.min() <= 110 and xs.max() - xs.min() < 30
    assert (mask[0] == mask[-1]).mean() > 0.99  # he does not move


def test_the_scan_finds_the_man_standing_still_by_the_motorcycle(video):
    from anonymask.models.anonymizer.pose.scan import PersonEvidence, PoseScanner
    from anonymask.models.anonymizer.pose.settings import EvidenceSettings, SamePersonSettings, ScanSettings

    frames, mask = video
    found = [t for t in (0, 4, 8) if any(_on(d, mask[t]) for d in PoseScanner(None, ScanSettings(rotate=1), PersonEvidence(EvidenceSettings()), SamePersonSettings()).scan(frames[t], [], full=True))]
    assert len(found) >= 2, found
    # and the check against a drifting refinement is what finds him: without the anchored
    # regions the scan misses him on these frames
    assert not any(_on(d, mask[0]) for d in PoseScanner(None, ScanSettings(rotate=1, anchor=False), PersonEvidence(EvidenceSettings()), SamePersonSettings()).scan(frames[0], [], full=True))


@pytest.mark.slow
def test_discovery_keeps_the_man_standing_still_for_the_whole_video(video, discovery):
    """A track covers him on >= 70% of the 48 frames (followed, searched or held in place; the
    pose stage holds a track that ends inside the frame for 10 more frames); a hallucinated body
    next to him does not take his track over. Before: no track on him in any frame."""
    from anonymask.models.anonymizer.pose.people import get_detector

    frames, mask = video
    disc = discovery(get_detector("mediapipe"), t_len=len(frames))  # production's settings
    for f in frames:
        disc.push(f)
    best = max(sum(_on(d, mask[t]) for t, d in tr.frames.items()) for tr in disc.tracker.tracks)
    assert best >= 0.7 * len(frames), best
