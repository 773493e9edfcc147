"""The weight-backed audit detector (torchvision FCOS): real loading code, random weights saved in
torchvision's own state-dict format, through the audit's decision."""

import numpy as np
import pytest

from anonymask.core.errors import MissingWeightsError
from anonymask.models.anonymizer.audit import audit_frames, get_auditor
from anonymask.models.anonymizer.audit.fcos import FCOS_FILE, load_fcos


def test_missing_weights_name_the_file(tmp_path, monkeypatch):
    with pytest.raises(MissingWeightsError) as e:
        load_fcos(tmp_path)
    assert FCOS_FILE in str(e.value) and str(tmp_path) in str(e.value)
    monkeypatch.delenv("ANONYMASK_WEIGHTS", raising=False)
    with pytest.raises(MissingWeightsError, match="ANONYMASK_WEIGHTS is not set"):
        load_fcos()


def _save_random_fcos(root, favour: int):
    """A randomly initialised FCOS whose class head favours COCO class ``favour`` (so that random
    weights still give confident boxes of one known class)."""
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()
    import torch
    from torchvision.models.detection import fcos_resnet50_fpn

    torch.manual_seed(0)
    m = fcos_resnet50_fpn(weights=None, weights_backbone=None)
    with torch.no_grad():
        m.head.classification_head.cls_logits.bias[favour] = 6.0
    (root / "torchvision").mkdir(parents=True, exist_ok=True)
    torch.save(m.state_dict(), root / "torchvision" / FCOS_FILE)
    return m


def test_random_weights_load_and_only_people_outside_avatars_fail_the_audit(tmp_path, monkeypatch, pose2sim_frames):
    import torch

    saved = _save_random_fcos(tmp_path, favour=1)  # COCO 1 = person
    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(tmp_path))
    aud = get_auditor("fcos", min_score=0.5, min_size=160, max_people=5)
    name = "head.classification_head.cls_logits.bias"
    assert torch.equal(aud.model.state_dict()[name], saved.state_dict()[name])
    fr = pose2sim_frames(n=3)
    h, w = fr.shape[1:3]
    dets = aud.detect(fr[0])
    assert 0 < len(dets) <= 5
    for kind, box, score in dets:
        assert kind == "body" and score >= 0.5
        assert 0 <= box[0] <= box[2] <= w and 0 <= box[1] <= box[3] <= h
    none, allsyn = np.zeros((h, w), bool), np.ones((h, w), bool)
    rep = audit_frames(((t, f, none) for t, f in enumerate(fr)), [aud], min_frames={"body": 2})
    assert not rep.passed and rep.findings[0].kind == "body"
    rep = audit_frames(((t, f, allsyn) for t, f in enumerate(fr)), [aud], min_frames={"body": 2})
    assert rep.passed and rep.on_avatars == rep.detections > 0


def test_boxes_of_other_classes_are_not_people(tmp_path, pose2sim_frames):
    _save_random_fcos(tmp_path, favour=3)  # COCO 3 = car
    aud = get_auditor("fcos", root=str(tmp_path), min_score=0.5, min_size=160)
    assert aud.detect(pose2sim_frames(n=1)[0]) == []
