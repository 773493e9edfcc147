"""mediapipe backend on a real video with people (sports2d's demo clip, shipped in its wheel)."""

import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

from anonymask.models.anonymizer.pose.estimate import estimate_people
from anonymask.models.anonymizer.pose.people import PeopleDetector


def _demo_video() -> Path:
    spec = importlib.util.find_spec("Sports2D")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("sports2d is not installed (its demo.mp4 is the real test video)")
    path = Path(list(spec.submodule_search_locations)[0]) / "Demo" / "demo.mp4"
    if not path.is_file():
        pytest.skip(f"{path} missing from the sports2d package")
    return path


def test_mediapipe_backend_on_real_video(body, pose_settings):
    import cv2

    from anonymask.storage.video_io import read_frames

    # frames 95-110: one person walking across the lawn, one standing on the box
    full = read_frames(_demo_video(), start=95, step=5, max_frames=4)
    assert full.shape[0] == 4
    h, w = full.shape[1:3]
    size = (480, int(round(h * 480 / w / 2)) * 2)  # ~480 wide, even height
    frames = np.stack([cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in full])
    written = {}

    def write(t0, labels, prob):
        written[t0] = (labels, prob)

    start = time.perf_counter()
    settings = pose_settings(**{"fit.iterations": 60, "discover.tiles": True, "discover.keyframe_every": 2})
    res = estimate_people([(0, frames[:2]), (2, frames[2:])], frames.shape[:3], body.rest_joints(), settings,
                          detector=PeopleDetector(), camera=None, source="demo.mp4", write_window=write,
                          read_frames=None, paint_frame=None, relabel_frame=None, discovery=None)
    seconds = time.perf_counter() - start
    assert sorted(written) == [0, 2] and written[0][0].shape == (2,) + frames.shape[1:3]
    assert len(res.tracks) >= 1
    assert res.instance_track is not None and (res.instance_track >= 0).sum() == len(res.tracks)
    main = res.tracks[0].window(0, len(frames))  # tracks are compact: over the video here
    assert main.valid.sum() >= 2
    joints = body.pose_track(main).joints[main.valid]
    depth = joints[:, 0, 2]
    print(f"mediapipe on demo.mp4 {frames.shape}: {len(res.tracks)} track(s), pelvis depth {depth.round(2)} m, "
          f"camera fx {res.camera.fx:.0f}, {seconds:.1f} s, {res.diagnostics}")
    assert np.all((depth > 1.0) & (depth < 30.0))
    # the fitted pelvis projects inside the person's box, with the box's margin
    uv = res.camera.project(joints[:, 0])
    box = res.boxes[0][main.valid]
    pad = 0.25 * (box[:, 3] - box[:, 1])
    assert np.all((uv[:, 0] > box[:, 0] - pad) & (uv[:, 0] < box[:, 2] + pad))
    assert np.all((uv[:, 1] > box[:, 1] - pad) & (uv[:, 1] < box[:, 3] + pad))
    # every posed person's pixels are labelled in the frames they were seen
    labels = np.concatenate([written[0][0], written[2][0]])
    raw_ids = np.nonzero(res.instance_track == 0)[0]
    assert np.isin(labels[main.valid], raw_ids + 1).any(axis=(1, 2)).all()


def test_nobody_is_carried_across_a_cut(body, pose_settings):
    """People seen before a cut are not held, followed or extended into the next shot (a scene
    with nobody): :func:`estimate_people_by_shot` runs each shot on its own. The whole clip as one
    shot holds them there (``bridge_after_end``), which is what the test guards against."""
    import cv2

    from anonymask.models.anonymizer.pose.estimate import estimate_people_by_shot
    from anonymask.storage.video_io import read_frames

    full = read_frames(_demo_video(), start=95, step=5, max_frames=3)
    h, w = full.shape[1:3]
    size = (320, int(round(h * 320 / w / 2)) * 2)
    people = np.stack([cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in full])
    empty = cv2.GaussianBlur(np.random.default_rng(0).integers(0, 256, people.shape[1:], np.uint8), (31, 31), 9)
    frames = np.concatenate([people, np.stack([empty] * 3), people[::-1]])  # people, nobody, people
    settings = pose_settings(**{"fit.iterations": 20, "scan.enabled": False})
    opts = dict(detector=PeopleDetector(), camera=None, source="cut.mp4", paint_frame=None, relabel_frame=None)
    labels = np.zeros(frames.shape[:3], np.uint16)

    def write(t0, lab, prob):
        labels[t0 : t0 + len(lab)] = lab

    def valid_after_cut(res):
        return [int(t.window(0, len(frames)).valid[3:].sum()) for t in res.tracks]

    one = estimate_people([(0, frames)], frames.shape[:3], body.rest_joints(), settings, write_window=None,
                          read_frames=None, discovery=None, **opts)
    assert max(valid_after_cut(one)) > 0  # held past the cut when the clip is one shot
    res = estimate_people_by_shot([(0, 3), (3, 6), (6, 9)], frames.shape[:3], body.rest_joints(), settings,
                                  write_window=write, read_frames=lambda a, b: frames[a:b], block=64, **opts)
    shot_of = []  # each track lives in one shot
    for t in res.tracks:
        seen = np.flatnonzero(t.window(0, len(frames)).valid)
        assert seen.size and seen[0] // 3 == seen[-1] // 3
        shot_of.append(int(seen[0] // 3))
    assert 0 in shot_of and 2 in shot_of and 1 not in shot_of
    assert not labels[3:6].any() and labels[:3].any() and labels[6:].any()
    for t in range(len(frames)):  # a frame's instance labels name tracks of its own shot
        ids = np.unique(labels[t][labels[t] > 0]) - 1
        assert all(shot_of[res.instance_track[i]] == t // 3 for i in ids if res.instance_track[i] >= 0)
    assert res.boxes.shape == (len(res.tracks), 9, 4) and np.isnan(res.boxes[:, 3:6]).all()
    assert res.diagnostics["shots"] == 3
    assert {f"track{j}_frames" for j in range(len(res.tracks))} <= set(res.diagnostics)  # renumbered
