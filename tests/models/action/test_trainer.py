"""Trainer: learning on an easy store, exact resume, cached == uncached, metrics, schedule."""

from __future__ import annotations

import math

import pytest
import torch

from anonymask.models.training.action.clips import ClipDataset
from anonymask.models.training.action.feature_cache import build_feature_cache
from anonymask.models.training.action.metrics import classification_metrics
from anonymask.models.training.action.mvit import build_action_model
from anonymask.models.training.action.settings import TrainSettings
from anonymask.models.training.action.synthetic import make_synthetic_store
from anonymask.models.training.action.trainer import Trainer, lr_lambda

CLIP = dict(clip_len=8, frame_stride=1, size=(32, 32), clips_per_video=1)


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("train") / "syn.zarr")
    make_synthetic_store(url, num_classes=3, videos_per_class={"train": 6, "test": 3}, frames=12, size=(32, 32))
    return url


@pytest.fixture(scope="module")
def data(store_url):
    train = ClipDataset(store_url, "xsub", "train", "rend_diff", "r", **CLIP)
    test = ClipDataset(store_url, "xsub", "test", "rend_diff", "r", **CLIP)
    return train, test


def _cfg(**kw):
    base = dict(epochs=2, batch_size=4, lr=0.1, warmup_epochs=0.5, log_every=1, num_workers=0, eval_every=1,
                compare_accountants=())  # fmt: skip
    base.update(kw)
    return TrainSettings(**base)


def _params(model):
    return {n: p.detach().clone() for n, p in model.trainable_named_parameters()}


def test_two_epochs_learn_the_easy_store_better_than_chance(data):
    train, test = data
    model = build_action_model(3, arch="tiny", seed=0)
    events = []
    hist = Trainer(model, train, _cfg(), eval_data=test, progress=events.append).fit()
    assert [r["epoch"] for r in hist] == [1, 2]
    assert hist[-1]["train_loss"] < hist[0]["train_loss"]
    ev = hist[-1]["eval"]
    assert ev["top1"] >= 2 / 3  # chance is 1/3
    assert len(ev["per_class_acc"]) == 3 and ev["videos"] == 9
    steps = [e for e in events if e["event"] == "step"]
    assert len(steps) == 2 * math.ceil(18 / 4) and all("loss" in e and "lr" in e for e in steps)
    assert [e["epoch"] for e in events if e["event"] == "epoch"] == [1, 2]


def test_resume_from_checkpoint_reaches_the_same_state(data, tmp_path):
    train, test = data
    full = build_action_model(3, arch="tiny", seed=0, stochastic_depth_prob=0.3)
    t_full = Trainer(full, train, _cfg(), eval_data=test)
    t_full.fit()
    part = build_action_model(3, arch="tiny", seed=0, stochastic_depth_prob=0.3)
    ckpt = tmp_path / "ckpt.pt"
    Trainer(part, train, _cfg(), eval_data=test, checkpoint_path=ckpt).fit(until_epoch=1)
    assert ckpt.exists()
    torch.rand(5)  # disturb the global RNG: the checkpoint must restore it
    fresh = build_action_model(3, arch="tiny", seed=0, stochastic_depth_prob=0.3)
    t_res = Trainer(fresh, train, _cfg(), eval_data=test)
    t_res.fit(resume_from=ckpt)
    assert t_res.step == t_full.step and t_res.epoch == 2
    for (n, a), b in zip(_params(full).items(), _params(fresh).values()):
        assert torch.equal(a, b), n
    assert t_res.history == t_full.history
    mom_a = [t_full.optimizer.state[p]["momentum_buffer"] for p in t_full.params.values()]
    mom_b = [t_res.optimizer.state[p]["momentum_buffer"] for p in t_res.params.values()]
    assert all(torch.equal(a, b) for a, b in zip(mom_a, mom_b))
    other = build_action_model(3, arch="tiny", seed=1, stochastic_depth_prob=0.3)
    with pytest.raises(ValueError, match="other frozen weights"):
        Trainer(other, train, _cfg()).load_checkpoint(ckpt)
    state = torch.load(ckpt, weights_only=False)
    assert state["privacy"]["mode"] == "nonprivate" and state["privacy"]["epsilon"] == "inf"


def test_cached_features_train_exactly_like_clips(data):
    train, _ = data
    a = build_action_model(3, arch="tiny", seed=2)
    b = build_action_model(3, arch="tiny", seed=2)
    cached = build_feature_cache(b, train, variants=("full",), batch_size=9).dataset(("full",))
    Trainer(a, train, _cfg(epochs=1)).fit()
    tb = Trainer(b, cached, _cfg(epochs=1))
    tb.fit()
    for (n, pa), pb in zip(_params(a).items(), _params(b).values()):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6, msg=n)
    with pytest.raises(ValueError, match="cached at split"):
        Trainer(build_action_model(3, arch="tiny", seed=2, trainable="head"), cached, _cfg())


def test_metrics_average_clips_per_video():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    labels = torch.tensor([0, 0, 1, 1])
    m = classification_metrics(logits, labels, ["a", "a", "b", "b"], 3)
    assert m["clip_top1"] == 0.5
    assert m["top1"] == 1.0 and m["videos"] == 2  # video a: mean softmax favours 0; b favours 1
    assert m["per_class_acc"] == [1.0, 1.0, None] and m["mean_class_acc"] == 1.0


def test_warmup_then_cosine_schedule():
    vals = [lr_lambda(s, 4, 20, 0.1) for s in range(21)]
    assert vals[:4] == [0.25, 0.5, 0.75, 1.0]
    assert vals[4] == pytest.approx(1.0) and vals[20] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(vals[4:], vals[5:]))
