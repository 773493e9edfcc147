import copy

import numpy as np
import pytest
import torch

from anonymask.models.anonymizer.skeleton.adversarial import (
    AdversarialTrainer,
    accuracy,
    anonymizer_loss,
    entropy,
    pretrain_classifier,
)
from anonymask.models.anonymizer.skeleton.anonymizers import ResidualMLPAnonymizer, UNetAnonymizer
from anonymask.models.anonymizer.skeleton.classifiers import SkeletonClassifier
from anonymask.models.anonymizer.skeleton.data import normalize_sequence


def _snapshot(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _changed(before, module):
    return [k for k, v in module.state_dict().items() if not torch.equal(before[k], v)]


@pytest.fixture()
def batch(synthetic):
    x, _ = normalize_sequence(synthetic["sequences"][:12], 0, align_hips=(12, 16))
    return torch.from_numpy(x), torch.from_numpy(synthetic["actions"][:12]), torch.from_numpy(synthetic["subjects"][:12])


@pytest.mark.parametrize("kind", ["mlp", "unet"])
def test_one_minimax_step_moves_the_anonymizer_not_the_frozen_action_classifier(batch, kind):
    x, y_action, y_subject = batch
    torch.manual_seed(0)
    anon = ResidualMLPAnonymizer(25, hidden=32) if kind == "mlp" else UNetAnonymizer(25, channels=8, depth=2)
    action = SkeletonClassifier(25, 3, channels=(8, 16))
    privacy = SkeletonClassifier(25, 6, channels=(8, 16))
    action.train()  # the trainer must freeze it even if handed over in training mode
    trainer = AdversarialTrainer(anon, action, privacy, alpha=1.0, beta=1.0, lr_anon=1e-2, lr_priv=1e-2)
    a0, c0, p0 = _snapshot(anon), _snapshot(action), _snapshot(privacy)

    parts = trainer.anonymizer_step(x, y_action)
    assert set(_changed(a0, anon)) == set(a0)  # every anonymizer tensor moved
    assert _changed(c0, action) == []  # weights AND BatchNorm statistics of the frozen model
    assert _changed(p0, privacy) == []  # the privacy classifier waits for its own step
    assert {"anon_loss", "action_ce", "entropy", "recon"} <= set(parts)

    a1 = _snapshot(anon)
    parts = trainer.privacy_step(x, y_subject)
    assert [k for k in _changed(p0, privacy) if "weight" in k or "bias" in k]
    assert _changed(a1, anon) == []
    assert _changed(c0, action) == []
    assert 0.0 <= parts["privacy_acc_privacy"] <= 1.0

    a2, p2 = _snapshot(anon), _snapshot(privacy)
    trainer.step(x.numpy(), y_action.numpy(), y_subject.numpy())
    assert _changed(a2, anon) and _changed(p2, privacy) and not _changed(c0, action)
    assert all(not p.requires_grad for p in action.parameters())


def test_trainer_with_several_private_heads(batch, synthetic):
    x, y_action, y_subject = batch
    torch.manual_seed(0)
    heads = {"reid": SkeletonClassifier(25, 6, channels=(8,)), "gender": SkeletonClassifier(25, 2, channels=(8,))}
    before = {k: _snapshot(v) for k, v in heads.items()}
    trainer = AdversarialTrainer(ResidualMLPAnonymizer(25, hidden=16), SkeletonClassifier(25, 3, channels=(8,)), heads)
    gender = torch.from_numpy(synthetic["genders"][:12])
    parts = trainer.step(x, y_action, {"reid": y_subject, "gender": gender})
    assert "entropy_reid" in parts and "entropy_gender" in parts
    assert parts["entropy"] == pytest.approx(parts["entropy_reid"] + parts["entropy_gender"], rel=1e-5)
    assert all(_changed(before[k], heads[k]) for k in heads)
    with pytest.raises(ValueError, match="exactly"):
        trainer.step(x, y_action, {"reid": y_subject})


def test_entropy_values():
    assert float(entropy(torch.zeros(4, 8))) == pytest.approx(np.log(8), rel=1e-6)
    confident = torch.tensor([[50.0, 0.0, 0.0]])
    assert float(entropy(confident)) < 1e-6


def test_anonymizer_loss_has_the_papers_signs():
    torch.manual_seed(0)
    action_logits = torch.randn(5, 3)
    y = torch.tensor([0, 1, 2, 0, 1])
    x = torch.randn(5, 4, 25, 3)
    x_anon = x + 0.1 * torch.randn_like(x)
    sharp = torch.randn(5, 6) * 10  # confident privacy classifier: low entropy
    flat = sharp / 100  # same ranking, near-uniform: high entropy
    alpha, beta = 0.7, 2.0

    loss_sharp, parts_sharp = anonymizer_loss(action_logits, y, sharp, x, x_anon, alpha, beta)
    loss_flat, parts_flat = anonymizer_loss(action_logits, y, flat, x, x_anon, alpha, beta)
    assert parts_flat["entropy"] > parts_sharp["entropy"]
    assert loss_flat < loss_sharp  # more privacy uncertainty -> lower anonymizer loss
    expected = (loss_sharp - loss_flat) / alpha
    assert float(expected) == pytest.approx(parts_flat["entropy"] - parts_sharp["entropy"], rel=1e-5)

    further = x + 0.3 * torch.randn_like(x)
    loss_far, parts_far = anonymizer_loss(action_logits, y, sharp, x, further, alpha, beta)
    assert parts_far["recon"] > parts_sharp["recon"]
    assert loss_far > loss_sharp  # larger reconstruction error -> higher loss

    better = action_logits.clone()
    better[torch.arange(5), y] += 5.0
    loss_better, _ = anonymizer_loss(better, y, sharp, x, x_anon, alpha, beta)
    assert loss_better < loss_sharp  # a more readable action -> lower loss

    # the total is exactly CE - alpha * H + beta * recon
    total = parts_sharp["action_ce"] - alpha * parts_sharp["entropy"] + beta * parts_sharp["recon"]
    assert float(loss_sharp) == pytest.approx(total, rel=1e-5)
    # recon is the mean squared joint displacement
    assert parts_sharp["recon"] == pytest.approx(float(((x - x_anon) ** 2).sum(-1).mean()), rel=1e-5)


def test_anonymizer_gradient_raises_privacy_entropy(batch):
    # Minimising the loss with beta = 0 and a fixed privacy classifier must make that classifier
    # less certain: the sign of the entropy term pushes the right way.
    x, y_action, _ = batch
    torch.manual_seed(0)
    privacy = SkeletonClassifier(25, 6, channels=(8, 16))
    trainer = AdversarialTrainer(
        ResidualMLPAnonymizer(25, hidden=32), SkeletonClassifier(25, 3, channels=(8,)), privacy,
        alpha=1.0, beta=0.0, lr_anon=3e-3,
    )
    privacy.eval()
    with torch.no_grad():
        h0 = float(entropy(privacy(trainer.anonymizer(x))))
    for _ in range(15):
        trainer.anonymizer_step(x, y_action)
    privacy.eval()
    with torch.no_grad():
        h1 = float(entropy(privacy(trainer.anonymizer(x))))
    assert h1 > h0


def test_pretrain_classifier_learns_actions(synthetic):
    x, _ = normalize_sequence(synthetic["sequences"], 0, align_hips=(12, 16))
    y = synthetic["actions"]
    torch.manual_seed(0)
    clf = SkeletonClassifier(25, 3, channels=(8, 16))
    untrained = accuracy(copy.deepcopy(clf), x[1::2], y[1::2])
    history = pretrain_classifier(clf, x[::2], y[::2], epochs=6, lr=5e-3, batch_size=16)
    assert len(history) == 6 and history[-1]["loss"] < history[0]["loss"]
    assert untrained < 0.7
    assert accuracy(clf, x[1::2], y[1::2]) >= 0.9  # held-out sequences, evaluation mode
    with pytest.raises(ValueError, match="labels"):
        pretrain_classifier(clf, x, None)


def test_pretrain_ignores_unknown_labels(synthetic):
    x, _ = normalize_sequence(synthetic["sequences"][:16], 0)
    y = np.full(16, -1)
    clf = SkeletonClassifier(25, 2, channels=(8,))
    before = _snapshot(clf)
    history = pretrain_classifier(clf, x, y, epochs=1)
    assert history[0]["acc"] == 0.0
    assert [k for k in _changed(before, clf) if "weight" in k] == []
    assert np.isnan(accuracy(clf, x, y))


def test_pretrain_from_a_dataloader_with_an_anonymizing_transform(synthetic):
    from torch.utils.data import DataLoader

    from anonymask.models.anonymizer.skeleton.data import SkeletonDataset

    ds = SkeletonDataset(list(synthetic["sequences"]), synthetic["actions"], synthetic["subjects"], length=16, random_crop=True)
    loader = DataLoader(ds, batch_size=12, shuffle=True)
    torch.manual_seed(0)
    clf = SkeletonClassifier(25, 6, channels=(8,))
    seen = []

    def transform(x):
        seen.append(x.shape)
        return x * 1.0

    history = pretrain_classifier(clf, loader, label_index=2, epochs=2, lr=5e-3, transform=transform)
    assert len(history) == 2 and 0.0 <= history[-1]["acc"] <= 1.0
    assert seen and all(s[1:] == (16, 25, 3) for s in seen)
    assert clf.head.out_features == 6 and not clf.training
