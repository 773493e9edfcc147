"""A fitted body is drawn only where it agrees with the person's box: one that reaches far past it
(a body the optimiser put half a metre from the camera) gets the box avatar instead."""

import numpy as np
import torch


def _setup(depth_drawn: float, frames: int = 10):
    """A standing rest-pose body 8 m from the camera gives the boxes (what was seen); the track
    holds the same body at ``depth_drawn``."""
    from anonymask.models.anonymizer.pose.kinematics import forward_kinematics
    from anonymask.models.anonymizer.pose.plausible import BODY_JOINTS
    from anonymask.models.shared.body.model import get_body_model
    from anonymask.models.shared.body.tracks import Camera, SMPLHTrack, upright_orient

    rest = get_body_model().rest_joints()
    cam = Camera.from_fov(640, 360)
    go = np.tile(upright_orient(), (frames, 1)).astype(np.float32)
    bp = np.zeros((frames, 63), np.float32)

    def joints_at(depth):
        tr = np.tile([0.0, 0.0, depth], (frames, 1)).astype(np.float32)
        j = forward_kinematics(torch.as_tensor(rest, dtype=torch.float32), torch.as_tensor(go), torch.as_tensor(bp),
                               torch.as_tensor(tr), num_joints=BODY_JOINTS).numpy()[:, :BODY_JOINTS]
        return tr, cam.project(j)

    _, seen = joints_at(8.0)
    boxes = np.concatenate([seen.min(1), seen.max(1)], 1)
    tr, _ = joints_at(depth_drawn)
    zeros = np.zeros((frames, 45), np.float32)
    track = SMPLHTrack(0, np.zeros(10), go, bp, zeros, zeros.copy(), tr, np.ones(frames, bool))
    return track, boxes, rest, cam


def test_a_body_where_it_was_seen_stays_within_its_box():
    from anonymask.models.anonymizer.pose.plausible import fit_disagrees, reach_past_box

    track, boxes, rest, cam = _setup(8.0)
    reach = reach_past_box(track, boxes, list(range(10)), rest, cam)
    assert reach.shape == (10,) and reach.max() < 0.01
    assert not fit_disagrees(reach, 0.5, 0.5)


def test_a_body_drawn_near_the_camera_reaches_far_past_the_box():
    from anonymask.models.anonymizer.pose.plausible import fit_disagrees, reach_past_box

    track, boxes, rest, cam = _setup(0.6)
    reach = reach_past_box(track, boxes, list(range(10)), rest, cam)
    assert reach.min() > 1.0  # over a box height past it on every side the frame shows
    assert fit_disagrees(reach, 0.5, 0.5)
    # only frames where a box was seen count; none: nothing to judge
    none = np.full_like(boxes, np.nan)
    assert reach_past_box(track, none, list(range(10)), rest, cam).size == 0
    assert not fit_disagrees(np.zeros(0), 0.5, 0.5)


def test_a_fit_past_its_box_in_few_frames_is_kept():
    from anonymask.models.anonymizer.pose.plausible import fit_disagrees

    reach = np.array([0.0] * 7 + [2.0] * 3)
    assert not fit_disagrees(reach, 0.5, 0.5)
    assert fit_disagrees(reach, 0.5, 0.3)
