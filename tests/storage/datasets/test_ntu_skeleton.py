"""NTU .skeleton parsing: a file written by hand in the real format, tracks, errors with line numbers."""

from __future__ import annotations

import numpy as np
import pytest

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets.ntu_skeleton import (
    NUM_JOINTS,
    main_bodies,
    read_body_tracks,
    read_ntu_skeleton,
    write_ntu_skeleton,
)

ID_A, ID_B = "72057594037931101", "72057594037931143"


def joint_lines(base: float, jitter: float) -> list[str]:
    out = []
    for j in range(NUM_JOINTS):
        x, y, z = base + 0.01 * j, 0.5 - 0.02 * j + jitter, 3.0 + jitter
        out.append(f"{x:.6f} {y:.6f} {z:.6f} 250.1 190.2 {1000 + j}.5 {500 + j}.25 -0.2 0.05 0.96 -0.12 2")
    return out


def body_block(body_id: str, base: float, jitter: float) -> list[str]:
    return [f"{body_id} 0 1 1 1 1 0 0.02764709 0.05745083 2", "25", *joint_lines(base, jitter)]


def real_format_text() -> str:
    """4 frames: A alone, A+B, nobody, B alone. B moves a lot, A barely."""
    lines = ["4"]
    lines += ["1", *body_block(ID_A, 0.1, 0.0)]
    lines += ["2", *body_block(ID_A, 0.1, 0.001), *body_block(ID_B, -0.4, 0.0)]
    lines += ["0"]
    lines += ["1", *body_block(ID_B, -0.4, 0.3)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def skel_file(tmp_path):
    p = tmp_path / "S001C001P001R001A050.skeleton"
    p.write_text(real_format_text())
    return p


def test_parse_real_format(skel_file):
    sk = read_ntu_skeleton(skel_file)
    assert sk.num_frames == 4 and len(sk.bodies) == 2
    a, b = sk.bodies
    assert (a.body_id, b.body_id) == (ID_A, ID_B)
    assert a.joints.shape == (4, 25, 3) and a.joints.dtype == np.float32
    assert a.color_xy.shape == (4, 25, 2)
    assert a.present.tolist() == [True, True, False, False]
    assert b.present.tolist() == [False, True, False, True]
    assert np.isnan(a.joints[2:]).all() and np.isnan(b.joints[[0, 2]]).all()
    assert not np.isnan(a.joints[:2]).any()
    # values land in the right slots: x of joint 3 of A, colour x/y of joint 7
    assert a.joints[0, 3, 0] == pytest.approx(0.13)
    assert a.joints[0, 3, 2] == pytest.approx(3.0)
    assert tuple(a.color_xy[0, 7]) == pytest.approx((1007.5, 507.25))
    assert b.joints[3, 0, 1] == pytest.approx(0.8)


def test_main_bodies_by_motion(skel_file):
    sk = read_ntu_skeleton(skel_file)
    assert sk.bodies[1].motion_energy() > sk.bodies[0].motion_energy() > 0
    assert [b.body_id for b in main_bodies(sk, 1)] == [ID_B]
    assert [b.body_id for b in main_bodies(sk, 2)] == [ID_B, ID_A]


def test_compact_body_tracks(skel_file):
    a, b = read_body_tracks(skel_file)
    assert a.shape == (2, 25, 3) and b.shape == (2, 25, 3)
    assert np.isfinite(a).all() and np.isfinite(b).all()
    assert b[1, 0, 1] == pytest.approx(0.8)  # B's second appearance is frame 3


def test_write_read_roundtrip(tmp_path):
    rng = np.random.default_rng(0)
    joints = rng.normal(size=(2, 6, 25, 3)).astype(np.float32)
    joints[1, :2] = np.nan  # second body enters at frame 2
    joints[0, 5] = np.nan
    path = write_ntu_skeleton(tmp_path / "x.skeleton", joints)
    sk = read_ntu_skeleton(path)
    assert sk.num_frames == 6 and len(sk.bodies) == 2
    for k in range(2):
        np.testing.assert_allclose(sk.bodies[k].joints, joints[k], rtol=1e-5, atol=1e-6)
    assert sk.bodies[1].present.tolist() == [False, False, True, True, True, True]


def test_truncated_file_names_line(skel_file, tmp_path):
    lines = real_format_text().splitlines()
    cut = tmp_path / "cut.skeleton"
    cut.write_text("\n".join(lines[:40]) + "\n")
    with pytest.raises(DatasetError, match=r"cut\.skeleton:40: file ends early") as e:
        read_ntu_skeleton(cut)
    assert "truncated" in str(e.value)


@pytest.mark.parametrize(
    "lineno, replacement, message",
    [
        (1, "four", "frame count"),
        (2, "1 2", "body count"),
        (4, "24", "expected 25 joints"),
        (10, "0.1 0.2 oops 1 2 3 4 5 6 7 8 9", "non-numeric"),
        (10, "0.1 0.2 0.3", "joint line"),
        (10, "nan 0.2 0.3 1 2 3 4 5 6 7 8 9", "non-finite"),
    ],
)
def test_garbled_lines(tmp_path, lineno, replacement, message):
    lines = real_format_text().splitlines()
    lines[lineno - 1] = replacement
    p = tmp_path / "bad.skeleton"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=message) as e:
        read_ntu_skeleton(p)
    assert f"bad.skeleton:{lineno}:" in str(e.value)


def test_extra_content_and_missing_file(tmp_path):
    p = tmp_path / "extra.skeleton"
    p.write_text(real_format_text() + "\n7\n")
    with pytest.raises(DatasetError, match="after the last of 4 frames"):
        read_ntu_skeleton(p)
    with pytest.raises(DatasetError, match="does not exist"):
        read_ntu_skeleton(tmp_path / "nope.skeleton")
