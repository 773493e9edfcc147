"""The weight-backed person detector (torchvision Keypoint R-CNN + Mask R-CNN): real loading code,
random weights saved in torchvision's own state-dict format."""

import numpy as np
import pytest

from anonymask.core.errors import MissingWeightsError
from anonymask.models.anonymizer.pose.rcnn import KEYPOINT_FILE, MASK_FILE, coco_to_landmarks, load_rcnn


def test_missing_weights_name_the_files(tmp_path):
    with pytest.raises(MissingWeightsError) as e:
        load_rcnn(tmp_path)
    assert KEYPOINT_FILE in str(e.value) and MASK_FILE in str(e.value) and "download.pytorch.org" in str(e.value)


def test_coco_keypoints_map_onto_the_blazepose_layout():
    kps = np.arange(17 * 3, dtype=np.float32).reshape(17, 3)
    kp2d, conf = coco_to_landmarks(kps, np.full(17, 10.0))
    assert np.allclose(kp2d[11], kps[5, :2]) and np.allclose(kp2d[28], kps[16, :2])  # shoulder, ankle
    assert conf[0] > 0.99 and conf[1] == 0.0  # nose seen; inner eye corner has no COCO keypoint


@pytest.mark.slow
def test_random_weights_load_through_the_real_loader_and_detect(tmp_path, pose2sim_frames):
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()
    import torch
    from torchvision.models.detection import keypointrcnn_resnet50_fpn, maskrcnn_resnet50_fpn

    from anonymask.models.anonymizer.pose.rcnn import RCNNPeopleDetector

    torch.manual_seed(0)
    d = tmp_path / "torchvision"
    d.mkdir()
    kp = keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None)
    torch.save(kp.state_dict(), d / KEYPOINT_FILE)
    torch.save(maskrcnn_resnet50_fpn(weights=None, weights_backbone=None).state_dict(), d / MASK_FILE)
    det = RCNNPeopleDetector(tmp_path, min_score=0.0, device="cpu", min_size=256, max_people=3)
    name = "roi_heads.keypoint_predictor.kps_score_lowres.weight"
    assert torch.equal(det.kp.state_dict()[name], kp.state_dict()[name])
    f = pose2sim_frames()[0]
    dets = det.detect(f)
    assert len(dets) <= 3
    for x in dets:
        x0, y0, x1, y1 = x.region
        assert x.mask.shape == (y1 - y0, x1 - x0) and x.kp2d.shape == (33, 2)
