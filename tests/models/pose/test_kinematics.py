"""The joint-only kinematics used for fitting must pose joints exactly as the body model does."""

import numpy as np
import torch

from anonymask.models.anonymizer.pose.kinematics import axis_angle_to_matrix, forward_kinematics


def test_axis_angle_matches_scipy(rng):
    from scipy.spatial.transform import Rotation

    aa = rng.normal(size=(20, 3)) * 1.5
    aa[0] = 0.0  # Rodrigues must be stable at the identity
    got = axis_angle_to_matrix(torch.tensor(aa)).numpy()
    np.testing.assert_allclose(got, Rotation.from_rotvec(aa).as_matrix(), atol=1e-9)


def test_forward_kinematics_matches_body_model(body, rng):
    t = 6
    go = rng.normal(size=(t, 3)) * 1.0
    bp = rng.normal(size=(t, 63)) * 0.5
    hands = rng.normal(size=(t, 90)) * 0.3
    tr = rng.normal(size=(t, 3)) + [0.0, 0.0, 3.0]
    want = body.forward(np.zeros(10), go, bp, hands[:, :45], hands[:, 45:], tr).joints  # (T,52,3)
    rest = torch.tensor(body.rest_joints(), dtype=torch.float64)
    f64 = {k: torch.tensor(v, dtype=torch.float64) for k, v in dict(go=go, bp=bp, tr=tr, h=hands).items()}
    got = forward_kinematics(rest, f64["go"], f64["bp"], f64["tr"], hand_pose=f64["h"]).numpy()
    assert got.shape == want.shape == (t, 52, 3)
    err = np.abs(got - want).max()
    assert err < 1e-3, f"max joint difference {err * 1000:.2f} mm"
    # body only (the fitter's fast path) agrees on the first 22 joints, with flat hands
    body_only = forward_kinematics(rest, f64["go"], f64["bp"], f64["tr"], num_joints=22).numpy()
    assert np.abs(body_only - want[:, :22]).max() < 1e-3
    # and the comparison is sensitive: a different pose moves the joints by far more than the tolerance
    other = forward_kinematics(rest, f64["go"], f64["bp"] * 0.5, f64["tr"], num_joints=22).numpy()
    assert np.abs(other - want[:, :22]).max() > 0.05
