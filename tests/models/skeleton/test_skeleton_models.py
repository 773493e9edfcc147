import pytest
import torch

from anonymask.models.anonymizer.skeleton.anonymizers import (
    ResidualMLPAnonymizer,
    UNetAnonymizer,
    anonymize_array,
    anonymize_track,
    build_anonymizer,
)
from anonymask.models.anonymizer.skeleton.classifiers import SkeletonClassifier


def _anonymizers(j):
    return [ResidualMLPAnonymizer(j, hidden=32, layers=3), UNetAnonymizer(j, channels=16, depth=3)]


@pytest.mark.parametrize("j", [25, 22, 52])
@pytest.mark.parametrize("t", [1, 7, 16, 33])
def test_anonymizers_keep_shape_for_any_length(j, t):
    torch.manual_seed(0)
    x = torch.randn(2, t, j, 3)
    for anon in _anonymizers(j):
        y = anon(x)
        assert y.shape == x.shape
        assert torch.isfinite(y).all()


@pytest.mark.parametrize("j", [25, 52])
def test_anonymizers_start_near_identity_but_can_learn(j):
    torch.manual_seed(0)
    x = torch.randn(3, 20, j, 3)
    for anon in _anonymizers(j):
        y = anon(x)
        assert (y - x).abs().max() < 1e-3
        assert (y - x).abs().max() > 0  # not exactly the identity: the residual branch is live
        # every parameter gets a gradient from a loss on the output after one step
        opt = torch.optim.SGD(anon.parameters(), lr=0.1)
        target = x + 1.0
        for _ in range(2):
            opt.zero_grad()
            ((anon(x) - target) ** 2).mean().backward()
            opt.step()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in anon.parameters())
        assert ((anon(x) - target) ** 2).mean() < ((x - target) ** 2).mean()


def test_unet_output_at_a_frame_does_not_depend_on_padding():
    # Cropping back after padding must return the frames of the input, not shifted ones.
    torch.manual_seed(0)
    anon = UNetAnonymizer(25, channels=8, depth=2, init_scale=0.5)
    x = torch.randn(1, 13, 25, 3)
    y = anon(x)
    assert y.shape == x.shape
    # a far-away change in time moves the output less than a change at the frame itself
    x2 = x.clone()
    x2[:, 6] += 1.0
    d = (anon(x2) - y).abs().sum(dim=(0, 2, 3))
    assert d.argmax() == 6


def test_anonymizer_rejects_wrong_joint_count():
    with pytest.raises(ValueError, match="25"):
        ResidualMLPAnonymizer(25)(torch.zeros(1, 4, 22, 3))


def test_build_anonymizer_round_trip():
    for anon in _anonymizers(22):
        clone = build_anonymizer(anon.config)
        clone.load_state_dict(anon.state_dict())
        x = torch.randn(1, 9, 22, 3)
        assert torch.equal(clone(x), anon(x))


def test_anonymize_track_puts_the_person_back_in_place():
    torch.manual_seed(0)
    anon = ResidualMLPAnonymizer(25, hidden=16, layers=2)
    track = torch.randn(11, 25, 3).numpy() * 0.2 + [3.0, 1.0, 4.0]
    out = anonymize_track(anon, track, root_joint=0, align_hips=(12, 16))
    assert out.shape == track.shape
    assert abs(out - track).max() < 1e-3  # near-identity anonymizer -> near-identical track
    batch = anonymize_array(anon, track[None].astype("float32"))
    assert batch.shape == (1, 11, 25, 3)


@pytest.mark.parametrize("j,graph", [(25, None), (22, "smpl22"), (52, None), (17, None)])
@pytest.mark.parametrize("t", [5, 32])
def test_classifier_shapes(j, graph, t):
    torch.manual_seed(0)
    clf = SkeletonClassifier(j, 7, graph, channels=(8, 16))
    assert clf(torch.randn(3, t, j, 3)).shape == (3, 7)
    assert clf.embed(torch.randn(2, t, j, 3)).shape == (2, 16)
    assert (clf.graph is None) == (j == 17)


def test_classifier_input_checks():
    with pytest.raises(ValueError, match="need a skeleton graph"):
        SkeletonClassifier(17, 3, features=("pos", "bone"))
    with pytest.raises(ValueError, match="subset"):
        SkeletonClassifier(25, 3, features=("pos", "colour"))
    with pytest.raises(ValueError, match="25"):
        SkeletonClassifier(25, 3)(torch.zeros(2, 8, 22, 3))


def test_classifier_sees_bone_lengths():
    # Two skeletons that differ only in scale must be separable from the features (scaling is the
    # identity cue a re-ID attacker relies on; normalisation must not have removed it).
    torch.manual_seed(0)
    clf = SkeletonClassifier(25, 2, channels=(8,))
    x = torch.randn(1, 6, 25, 3) * 0.3
    f1 = clf._inputs(x)
    f2 = clf._inputs(x * 1.1)
    length = clf.features.index("length")
    assert not torch.allclose(f1[..., -1], f2[..., -1])
    assert length == 3
