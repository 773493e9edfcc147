"""How far an avatar's joints land from its person's (models/anonymizer/metrics.py)."""

import numpy as np

from anonymask.models.anonymizer.metrics import avatar_joint_errors


def _person(t_len=4, height=200.0, x0=100.0):
    """(T, 1, 52, 2) joints of a person ``height`` px tall: the 22 body joints spread evenly top to
    bottom, the hand joints repeat them."""
    y = np.resize(np.linspace(50.0, 50.0 + height, 22), 52)
    j = np.stack([np.full(52, x0) + np.arange(52) % 5, y], axis=-1)
    return np.repeat(j[None, None], t_len, axis=0).astype(np.float32)


def test_an_avatar_shifted_by_a_known_amount_reads_that_share_of_the_height():
    truth = _person()
    avatar = truth.copy()
    avatar[..., 0] += 10.0  # 10 px right of a 200-px person: 5%
    body, ends = avatar_joint_errors(truth, avatar)
    assert len(body) == 4 and np.allclose(body, 5.0, atol=1e-4) and np.allclose(ends, 5.0, atol=1e-4)
    moved = avatar.copy()
    moved[:, :, [15, 20, 21]] += 20.0  # the head and wrists elsewhere: only they read it in full
    b2, e2 = avatar_joint_errors(truth, moved)
    assert np.all(np.array(e2) > 12.0) and np.all(np.array(b2) < np.array(e2))


def test_each_person_is_read_on_the_nearest_avatar_and_a_person_without_one_is_not_counted():
    a, b = _person(x0=100.0), _person(x0=400.0)
    truth = np.concatenate([a, b], axis=1)  # two people
    avatars = np.concatenate([b + 4.0, np.full_like(a, np.nan)], axis=1)  # one avatar, on the second
    body, _ = avatar_joint_errors(truth, avatars)
    assert len(body) == 4  # the first person has no avatar near them: left to the audit
    assert np.allclose(body, 100.0 * np.hypot(4.0, 4.0) / 200.0, atol=1e-3)
    none, _ = avatar_joint_errors(truth, np.full_like(truth, np.nan))
    assert none == []
