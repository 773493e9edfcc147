import os
import subprocess
import sys

import numpy as np
import pytest

from anonymask.models.shared.body.appearance import AppearanceBank
from anonymask.models.shared.body.model import get_body_model
from anonymask.models.shared.body.tracks import JOINT_INDEX as J


@pytest.fixture(scope="module")
def bank():
    return AppearanceBank(32, seed=0)


def test_bank_has_32_valid_avatars(bank):
    assert len(bank) == 32
    avatars = list(bank)
    assert len({a.name for a in avatars}) == 32
    for a in avatars:
        assert a.vertex_colors.shape == (6890, 3) and a.vertex_colors.dtype == np.uint8
        assert a.betas.shape == (10,) and a.gender in ("neutral", "male", "female")
    assert len({a.gender for a in avatars}) >= 2


def test_avatars_are_pairwise_visibly_different(bank):
    cols = np.stack([a.vertex_colors.astype(np.float64) for a in bank])
    betas = np.stack([a.betas for a in bank])
    worst = np.inf
    for i in range(len(cols)):
        for j in range(i + 1, len(cols)):
            colour = np.abs(cols[i] - cols[j]).mean()  # mean absolute difference per channel (0-255)
            shape = np.linalg.norm(betas[i] - betas[j])
            worst = min(worst, colour + 10.0 * shape)
            assert colour > 12.0, (i, j, colour)
    assert worst > 15.0


def test_bank_is_deterministic_and_seeded(bank):
    again = AppearanceBank(32, seed=0)
    other = AppearanceBank(32, seed=1)
    for i in (0, 5, 31):
        assert np.array_equal(again.avatar(i).vertex_colors, bank.avatar(i).vertex_colors)
        assert np.array_equal(again.avatar(i).betas, bank.avatar(i).betas)
    differs = [not np.array_equal(other.avatar(i).vertex_colors, bank.avatar(i).vertex_colors) for i in range(8)]
    assert all(differs)


def test_choose_is_stable_across_processes(bank):
    keys = [f"video_{k}/track_{k % 3}" for k in range(40)]
    here = [bank.choose(k).index for k in keys]
    assert here == [bank.choose(k).index for k in keys]
    assert len(set(here)) >= 15  # keys spread over the bank
    assert here == [AppearanceBank.key_index(k, 32) for k in keys]
    # the mapping does not depend on the process (Python's hash() would: PYTHONHASHSEED)
    code = ("from anonymask.models.shared.body.appearance import AppearanceBank as B;"
            f"print([B.key_index(k, 32) for k in {keys!r}])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "123"})
    assert out.stdout.strip().splitlines()[-1] == str(here)


def test_clothing_regions_follow_the_body(bank):
    model = get_body_model("neutral")
    v, jt = model.v_template, model.rest_joints()
    soles = v[:, 1] < v[:, 1].min() + 0.01
    chest = (np.abs(v[:, 1] - jt[J["spine3"], 1]) < 0.03) & (v[:, 2] > 0.05) & (np.abs(v[:, 0]) < 0.08)
    fingers = v[:, 0] > jt[J["left_middle2"], 0]
    crown = v[:, 1] > v[:, 1].max() - 0.01
    thigh = (np.abs(v[:, 1] - 0.5 * (jt[J["left_hip"], 1] + jt[J["left_knee"], 1])) < 0.02) & (v[:, 0] > 0.05)
    assert min(soles.sum(), chest.sum(), fingers.sum(), crown.sum(), thigh.sum()) >= 5

    def near(region, *rgbs, tol=40):
        """Most of the region's vertices have one of the given colours (up to shading noise)."""
        c = a.vertex_colors[region].astype(float)
        close = [np.abs(c - np.array(rgb)).sum(1) < tol for rgb in rgbs]
        return np.mean(np.any(close, axis=0)) > 0.8

    for a in bank:
        at = a.attributes
        assert near(soles, at["shoes"])
        assert near(fingers, at["skin"])  # hands are bare
        assert near(chest, at["shirt"], at["shirt2"])
        assert near(crown, at["skin"] if at["hair_style"] == "bald" else at["hair"])
        if at["legs"] == "long":
            assert near(thigh, at["trousers"])


def _boxes(n, t_len, tracks):
    """(n, t_len, 4) boxes: ``tracks`` = {i: (first, stop, (cx, cy), height)} (NaN elsewhere)."""
    out = np.full((n, t_len, 4), np.nan, np.float32)
    for i, (a, b, (cx, cy), h) in tracks.items():
        out[i, a:b] = [cx - h / 4, cy - h / 2, cx + h / 4, cy + h / 2]
    return out


def test_one_person_seen_as_tracks_in_turn_keeps_one_appearance():
    """carphone: a face avatar (frames 0-44), a posed one (45-67), a face one again (68-99) for one
    man changed clothes twice. Tracks in turn at the same place are one person's; people seen
    at the same time, far apart, or after a long gap are not."""
    from anonymask.models.shared.body.appearance import person_keys

    spans = [(0, 45), (45, 68), (68, 100), (10, 90), (80, 100), (0, 0)]
    boxes = _boxes(6, 100, {0: (0, 45, (80, 70), 100), 1: (45, 68, (85, 72), 110), 2: (68, 100, (78, 70), 100),
                            3: (10, 90, (300, 70), 100),  # someone else, at the same time
                            4: (80, 100, (90, 75), 100)})  # a second person near the first, while they are there
    keys = person_keys(spans, boxes)
    assert keys[:3] == [0, 0, 0]  # the chain is one person, with the first track's appearance
    assert keys[3] == 3 and keys[4] == 4 and keys[5] == 5
    far = _boxes(2, 100, {0: (0, 40, (80, 70), 100), 1: (42, 100, (200, 70), 100)})
    assert person_keys([(0, 40), (42, 100)], far) == [0, 1]  # starts elsewhere
    late = _boxes(2, 100, {0: (0, 40, (80, 70), 100), 1: (60, 100, (80, 70), 100)})
    assert person_keys([(0, 40), (60, 100)], late) == [0, 1]  # 20 frames later: maybe someone else
    small = _boxes(2, 100, {0: (0, 40, (80, 70), 100), 1: (41, 100, (80, 70), 40)})
    assert person_keys([(0, 40), (41, 100)], small) == [0, 1]  # 2.5x smaller: not them

    cut = _boxes(2, 100, {0: (0, 40, (80, 70), 100), 1: (41, 100, (80, 70), 100)})
    assert person_keys([(0, 40), (41, 100)], cut) == [0, 0]
    assert person_keys([(0, 40), (41, 100)], cut, shots=[(0, 41), (41, 100)]) == [0, 1]  # across a cut


def _posed_track(n: int = 24, seed: int = 1):
    """A neutral-shape track in varied poses 2.5 m in front of the camera (a fitted person)."""
    from anonymask.models.shared.body.tracks import SMPLHTrack

    rng = np.random.default_rng(seed)
    go = (np.tile([np.pi, 0.0, 0.0], (n, 1)) + rng.normal(0, 0.2, (n, 3))).astype(np.float32)
    zeros = np.zeros((n, 45), np.float32)
    return SMPLHTrack(0, np.zeros(10, np.float32), go, rng.normal(0, 0.35, (n, 63)).astype(np.float32), zeros, zeros,
                      np.tile([0.0, 0.2, 2.5], (n, 1)).astype(np.float32))


@pytest.mark.parametrize("tol", [0.02, 0.01])
def test_avatars_move_on_the_fitted_skeleton(tol):
    """An avatar replaces a person fitted with the neutral shape: with ``skeleton_tol`` its joints,
    posed with the person's motion and its feet kept on the floor, stay within the tolerance of the
    fitted body's joints in the rest pose, and posed within twice it (the pelvis is placed by the
    feet, each joint is within the tolerance of its rest place: two such offsets can add up); drawn
    freely, bone lengths move the head and wrists by many centimetres."""
    body = get_body_model()
    track = _posed_track()
    fitted = body.pose_track(track).joints[:, :22]

    def worst(bank) -> float:
        return max(float(np.linalg.norm(body.pose_track(body.reshape_track(track, a.betas)).joints[:, :22] - fitted,
                                        axis=-1).max()) for a in bank)

    kept = AppearanceBank(32, seed=0, skeleton_tol=tol)
    neutral = body.rest()
    rest0 = neutral.joints[0, :22] - [0, neutral.vertices[0, :, 1].min(), 0]
    for a in kept:
        r = body.rest(a.betas)
        rest = r.joints[0, :22] - [0, r.vertices[0, :, 1].min(), 0]
        assert np.linalg.norm(rest - rest0, axis=1).max() <= tol + 1e-4, a.name
    assert worst(kept) <= 2 * tol
    assert worst(AppearanceBank(32, seed=0)) > 0.1  # free shapes: 19 cm on this track


def test_skeleton_keeping_shapes_still_differ_in_build():
    """Keeping the skeleton does not make every avatar the same body: their surfaces still differ
    by centimetres (girth, belly, shoulders), only the bones stay."""
    body = get_body_model()
    bank = AppearanceBank(32, seed=0, skeleton_tol=0.02)
    v0 = body.rest().vertices[0]
    spread = [float(np.abs(body.rest(a.betas).vertices[0] - v0).max()) for a in bank]
    assert np.median(spread) > 0.02 and max(spread) > 0.04
    widths = [np.ptp(body.rest(a.betas).vertices[0][:, 2]) for a in bank]  # front-to-back depth of the body
    assert max(widths) / min(widths) > 1.1
    assert len({a.gender for a in bank}) >= 2 and len(bank) == 32


def test_skeleton_keeping_shapes_bound_and_refuse_a_bad_tolerance():
    from anonymask.models.shared.body.appearance import SkeletonKeepingShapes

    body = get_body_model()
    shapes = SkeletonKeepingShapes(body, 0.02)
    assert 1 <= len(shapes.removed) < 10  # the size directions go, the rest stay
    big = np.full(10, 2.0, np.float32)
    assert shapes.max_shift(big) > 0.1 and shapes.max_shift(shapes(big)) <= 0.02 + 1e-6
    assert np.allclose(shapes(np.zeros(10)), 0.0)
    with pytest.raises(ValueError, match="tol"):
        SkeletonKeepingShapes(body, 0.0)


def test_clothes_and_hair_stand_off_the_body_and_skin_does_not(bank):
    from anonymask.models.shared.body.appearance import HAIR, SHIRT, SHOES, SKIN, TROUSERS, surface_offsets

    fits = []
    for a in bank:
        off = surface_offsets(a, (0.01, 0.03), 0.015, 0.01)
        assert off.shape == (6890,) and a.surface.shape == (6890,)
        assert (off[a.surface == SKIN] == 0).all()
        cloth = off[np.isin(a.surface, (SHIRT, TROUSERS))]
        assert np.allclose(cloth, 0.01 + 0.02 * a.fit)  # one looseness per avatar
        hair = off[a.surface == HAIR]
        assert np.allclose(hair, 0.0225 if a.attributes["hair_style"] == "long" else 0.015)
        assert np.allclose(off[a.surface == SHOES], 0.01)
        fits.append(a.fit)
    assert min(fits) < 0.3 and max(fits) > 0.7  # fitted and loose clothes both occur
    assert surface_offsets(bank.avatar(0), (0.0, 0.0), 0.0, 0.0) is None  # the bare body


def test_cloth_settings_are_a_range():
    from pydantic import ValidationError

    from anonymask.config.stages import RenderSettings

    assert RenderSettings(cloth_m=(0.0, 0.0)).cloth_m == (0.0, 0.0)
    with pytest.raises(ValidationError, match="fitted <= loose"):
        RenderSettings(cloth_m=(0.03, 0.01))
