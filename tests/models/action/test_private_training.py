"""The DP modes wired into the trainer: same numbers as models/training/privacy on the full model,
invariant 2 at the model level, tiny end-to-end runs per mode (clips and cached features), and
the trainer's own paths pinned against the mistakes that void a guarantee: a public term that
depends on the private batch (invariant 8) or on private pixels (2), a subspace from private data
(5), a psi term on raw clips, several clips of one video counted as separate records."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from anonymask.models.training.action.clips import ClipDataset, Collate
from anonymask.models.training.action.feature_cache import build_feature_cache, variant_input
from anonymask.models.training.action.mvit import build_action_model
from anonymask.models.training.action.prefix import FrozenPrefix, TrainableTail
from anonymask.models.training.action.settings import TrainSettings
from anonymask.models.training.action.strategies import PrivateStrategy, StepBatch
from anonymask.models.training.action.synthetic import make_synthetic_store
from anonymask.models.training.action.token_masks import model_public_tokens
from anonymask.models.training.action.trainer import Trainer
from anonymask.models.training.privacy.clipping import flatten, per_sample_grads, summed_grads
from anonymask.models.training.privacy.dpsgd import dpsgd_gradients
from anonymask.models.training.privacy.fpdp import PublicSubspace
from anonymask.models.training.privacy.mechanism import PrivateStep, private_token_inputs, public_token_inputs


def maskdp_gradients(model, params, x, y, pub, C, sigma, eb, generator):
    """The privacy module's MaskDP step with the same records as public batch (the reference)."""
    step = PrivateStep("maskdp", max_grad_norm=C, noise_multiplier=sigma, expected_batch_size=eb, generator=generator)
    return step(model, params, private_token_inputs(x, y, pub), public_token_inputs(x, y, pub))

CLIP = dict(clip_len=8, frame_stride=1, size=(32, 32), clips_per_video=1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("dp") / "syn.zarr")
    make_synthetic_store(url, num_classes=3, videos_per_class={"train": 4, "test": 2}, frames=10, size=(32, 32))
    train = ClipDataset(url, "xsub", "train", "rend_diff", "r", **CLIP)
    test = ClipDataset(url, "xsub", "test", "rend_diff", "r", **CLIP)
    return train, test


def _batch(ds, idx):
    return Collate(ds.sample_shapes())([ds[i] for i in idx])


def _kw(n, seed=0):
    return dict(max_grad_norm=0.5, noise_multiplier=0.8, sample_rate=0.25, num_samples=n, noise_seed=seed)


def _close(a, b):
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)


def test_maskdp_and_dpsgd_on_prefix_features_equal_the_privacy_functions_on_clips(data):
    train, _ = data
    model = build_action_model(3, arch="tiny", seed=5)
    model.eval()
    raw = _batch(train, [0, 3, 5, 8, 11])
    x, y = raw["video"], raw["label"]
    pub = model_public_tokens(model, raw["pixel_public"])
    assert pub.any(1).any() and (~pub).any(1).all()
    prefix, tail = FrozenPrefix(model), TrainableTail(model).eval()
    tail_params = {n: p for n, p in tail.named_parameters() if p.requires_grad}
    full_params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    rename = {id(p): n for n, p in full_params.items()}

    ref = maskdp_gradients(model, full_params, x, y, pub, 0.5, 0.8, 12 * 0.25,
                           generator=torch.Generator().manual_seed(3))
    sb = StepBatch({"private": (prefix(x, ~pub), None), "public": (prefix(x, pub), None)}, y, pub)
    got = PrivateStrategy("maskdp", **_kw(12, seed=3))(tail, tail_params, sb, sb).grads
    _close({rename[id(tail_params[n])]: g for n, g in got.items()}, ref)

    ref = dpsgd_gradients(model, full_params, x, y, 0.5, 0.8, 3.0, generator=torch.Generator().manual_seed(4))
    got = PrivateStrategy("dpsgd", **_kw(12, seed=4))(tail, tail_params, StepBatch({"full": (prefix(x), None)}, y)).grads
    _close({rename[id(tail_params[n])]: g for n, g in got.items()}, ref)


def test_maskdp_with_everything_trainable_uses_token_keep_on_clips(data):
    train, _ = data
    model = build_action_model(3, arch="tiny", seed=6, trainable="all")
    model.eval()
    raw = _batch(train, [1, 2, 4])
    x, y = raw["video"], raw["label"]
    pub = model_public_tokens(model, raw["pixel_public"])
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    ref = maskdp_gradients(model, params, x, y, pub, 1.0, 0.5, 3.0, generator=torch.Generator().manual_seed(1))
    sb = StepBatch({"private": (x, ~pub), "public": (x, pub)}, y, pub)
    kw = dict(_kw(12, seed=1), max_grad_norm=1.0, noise_multiplier=0.5)
    _close(PrivateStrategy("maskdp", **kw)(model, params, sb, sb).grads, ref)


def test_public_gradient_ignores_private_pixels_bit_for_bit(data):
    """Privacy invariant 2 through the real model: prefix features and the public-pass gradient."""
    train, _ = data
    model = build_action_model(3, arch="tiny", seed=7)
    model.eval()
    raw = _batch(train, [0, 1, 2, 3])
    x, y, pix = raw["video"], raw["label"], raw["pixel_public"]
    pub = model_public_tokens(model, pix)
    x2 = x.clone()
    private = (~pix)[:, None].expand_as(x)
    x2[private] = torch.randn(int(private.sum())) * 5
    x2[0, 0, 0, 0, 0] = float("nan") if not pix[0, 0, 0, 0] else x2[0, 0, 0, 0, 0]
    prefix, tail = FrozenPrefix(model), TrainableTail(model)
    params = {n: p for n, p in tail.named_parameters() if p.requires_grad}
    f1, f2 = prefix(x, pub), prefix(x2, pub)
    assert torch.equal(f1, f2)
    g1 = summed_grads(tail, f1, y, params)
    g2 = summed_grads(tail, f2, y, params)
    assert all(torch.equal(g1[k], g2[k]) for k in g1)
    assert not torch.equal(prefix(x), prefix(x2))  # the full variant does see them


def _dp_cfg(mode, **kw):
    base = dict(mode=mode, epochs=2, batch_size=4, lr=0.05, warmup_epochs=0.0, noise_multiplier=1.0,
                max_grad_norm=1.0, noise_seed=11, sampling_seed=12, public_seed=13, log_every=1, fpdp_k=4,
                fpdp_refresh_every=2, fpdp_public_size=6, compare_accountants=(), fpdp_psi="blur_1.5",
                fpdp_psi_allow_weak=True, num_workers=0, eval_every=1, size=(32, 32))  # fmt: skip
    base.update(kw)
    return TrainSettings(**base)


@pytest.mark.parametrize("mode", ["dpsgd", "maskdp", "fpdp"])
def test_tiny_end_to_end_run_per_private_mode(data, mode, tmp_path):
    train, test = data
    model = build_action_model(3, arch="tiny", seed=8)
    before = {n: p.detach().clone() for n, p in model.trainable_named_parameters()}
    events = []
    t = Trainer(model, train, _dp_cfg(mode), eval_data=test, public_data=test if mode == "fpdp" else None,
                progress=events.append, checkpoint_path=tmp_path / "c.pt")  # fmt: skip
    hist = t.fit()
    assert t.step == 2 * t.steps_per_epoch == 6  # 1/q = 12/4 steps per epoch, empty batches included
    assert 0 < hist[0]["epsilon"] < hist[1]["epsilon"] < math.inf
    assert all("loss" not in e for e in events)  # nothing computed on private clips is reported
    assert all("batch_size" not in e and "samples" not in e for e in events)  # nor realised Poisson counts
    assert any(not torch.equal(before[n], p) for n, p in model.trainable_named_parameters())
    rep = t.privacy_report()
    assert rep["mode"] == mode and rep["steps"] == 6 and rep["sigma"] == 1.0 and rep["q"] == pytest.approx(1 / 3)
    assert rep["epsilon"] == pytest.approx(hist[-1]["epsilon"])
    assert rep["mask_policy"] is not None and rep["seeds"]["fixed_pairwise_distinct"]
    assert rep["private"] and rep["accounting"] == "sound" and rep["record"] == "video"
    assert rep["adjacency"] == ("replace" if mode == "maskdp" else "add_remove")
    assert (rep["public_term"] is None) == (mode == "dpsgd")
    assert "independent Poisson batch" in (rep["public_term"] or "independent Poisson batch")
    if mode == "fpdp":
        assert rep["psi"]["sigma_px"] == 1.5 and not rep["psi"]["below_paper_floor"]  # floor 1.25 px at 32 px
    if mode == "maskdp":  # the tight accountant side by side with RDP, on request
        t.cfg.compare_accountants = ("pld",)
        pld = t.privacy_report()["epsilon_other"]["pld"]
        assert 0 < pld <= rep["epsilon"]
    state = torch.load(tmp_path / "c.pt", weights_only=False)
    assert state["privacy"]["steps"] == 6
    # resume: the ledger and noise generator come back
    again = Trainer(build_action_model(3, arch="tiny", seed=8), train, _dp_cfg(mode),
                    public_data=test if mode == "fpdp" else None)  # fmt: skip
    again.load_checkpoint(tmp_path / "c.pt")
    assert again.strategy.accountant.steps == 6
    assert again.strategy.epsilon() == pytest.approx(hist[-1]["epsilon"])


def test_maskdp_run_on_cached_features_matches_the_run_on_clips(data):
    train, _ = data
    a = build_action_model(3, arch="tiny", seed=9)
    b = build_action_model(3, arch="tiny", seed=9)
    cache = build_feature_cache(b, train, variants=("private", "public"), batch_size=12)
    Trainer(a, train, _dp_cfg("maskdp", epochs=1)).fit()
    Trainer(b, cache.dataset(("private", "public")), _dp_cfg("maskdp", epochs=1)).fit()
    for (n, pa), pb in zip(a.trainable_named_parameters(), [p for _, p in b.trainable_named_parameters()]):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6, msg=n)


def test_fpdp_needs_public_data_and_dp_modes_need_noise(data):
    train, _ = data
    model = build_action_model(3, arch="tiny", seed=1)
    with pytest.raises(ValueError, match="public_data"):
        Trainer(model, train, _dp_cfg("fpdp"))
    with pytest.raises(ValueError, match="finite number > 0"):
        Trainer(model, train, _dp_cfg("dpsgd", noise_multiplier=None, epsilon=float("inf")))
    t = Trainer(model, train, _dp_cfg("dpsgd", noise_multiplier=None, epsilon=8.0, delta=1e-3))
    assert 0 < t.strategy.sigma < 10
    with pytest.raises(ValueError, match="weaker than the paper"):  # the old blur_1 default
        Trainer(model, train, _dp_cfg("fpdp", fpdp_psi="blur_1", fpdp_psi_allow_weak=False), public_data=train)
    t = Trainer(model, train, _dp_cfg("fpdp", fpdp_psi="paper_blur", fpdp_psi_allow_weak=False), public_data=train)
    assert t.strategy.psi_variant == "blur_1.25" and not t.strategy.psi["below_paper_floor"]  # 10 px * 32/256


def test_fpdp_run_on_cached_features_matches_the_run_on_clips(data):
    train, test = data
    a = build_action_model(3, arch="tiny", seed=10)
    b = build_action_model(3, arch="tiny", seed=10)
    train_cache = build_feature_cache(b, train, variants=("full", "blur_1.5"), batch_size=12)
    public_cache = build_feature_cache(b, test, variants=("full",), batch_size=12)
    cfg = dict(epochs=1, fpdp_psi="blur_1.5")
    Trainer(a, train, _dp_cfg("fpdp", **cfg), public_data=test).fit()
    Trainer(b, train_cache.dataset(("full", "blur_1.5")), _dp_cfg("fpdp", **cfg),
            public_data=public_cache.dataset(("full",))).fit()  # fmt: skip
    for (n, pa), pb in zip(a.trainable_named_parameters(), [p for _, p in b.trainable_named_parameters()]):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6, msg=n)


def test_poisson_sampling_seed_is_secret_by_default_and_survives_resume(data, tmp_path):
    train, _ = data
    cfg = _dp_cfg("dpsgd", epochs=1, sampling_seed=None, noise_seed=None)
    t1 = Trainer(build_action_model(3, arch="tiny", seed=1), train, cfg, checkpoint_path=tmp_path / "c.pt")
    t2 = Trainer(build_action_model(3, arch="tiny", seed=1), train, cfg)
    assert t1.sampling_seed != t2.sampling_seed
    t1.fit()
    t2.load_checkpoint(tmp_path / "c.pt")
    assert t2.sampling_seed == t1.sampling_seed
    assert torch.equal(t2.strategy.generator.get_state(), t1.strategy.generator.get_state())


@pytest.mark.parametrize("mode", ["dpsgd", "maskdp", "fpdp"])
def test_an_empty_poisson_batch_is_a_noise_only_step(data, mode):
    train, test = data
    t = Trainer(build_action_model(3, arch="tiny", seed=2), train, _dp_cfg(mode, micro_batch=2),
                public_data=test if mode == "fpdp" else None)  # fmt: skip
    sb = t._step_batch(Collate(train.sample_shapes())([]), t.strategy.variants)
    res = t.strategy(t.net, t.params, sb, sb if mode != "dpsgd" else None)
    assert res.count == 0 and t.strategy.accountant.steps == 1
    assert all(torch.isfinite(g).all() for g in res.grads.values())
    assert any(g.abs().sum() > 0 for g in res.grads.values())  # the noise is still added


# -- the trainer's own paths against the mistakes that void a guarantee ---------------------------
class _PrivatePixelsChanged(ClipDataset):
    """The same clips with every PRIVATE pixel replaced by noise (public pixels untouched)."""

    @classmethod
    def of(cls, base: ClipDataset) -> _PrivatePixelsChanged:
        other = copy.copy(base)
        other.__class__ = cls
        return other

    def content_ids(self):  # other pixels: other cached features
        return super().content_ids() + [["private pixels changed"]]

    def __getitem__(self, i):
        item = dict(super().__getitem__(i))
        noise = torch.randn(item["video"].shape, generator=torch.Generator().manual_seed(100 + i)) * 3
        item["video"] = torch.where(item["pixel_public"][None], item["video"], noise)
        return item


def _public_terms(trainer, steps=3):
    """The noise-free public term of the first ``steps`` steps, as the trainer computed them."""
    seen = []

    def grab(ev):
        if ev.get("event") == "step" and len(seen) < steps:
            seen.append({n: g.clone() for n, g in trainer.strategy.last_parts.public_sum.items()})

    trainer.progress = grab
    trainer.fit(until_epoch=1)
    return seen


@pytest.mark.parametrize("mode", ["maskdp", "fpdp"])
def test_public_term_does_not_depend_on_which_records_the_private_batch_holds(data, mode):
    """Invariant 8 through the trainer: other private Poisson draws (sampling seeds), same public
    seed -> the same public terms, step for step; the paper's same-batch term changes with them."""
    train, test = data
    kw = dict(public_data=test if mode == "fpdp" else None)

    def run(seed, **cfg):
        model = build_action_model(3, arch="tiny", seed=3)
        return _public_terms(Trainer(model, train, _dp_cfg(mode, epochs=1, sampling_seed=seed, lr=0.0, **cfg), **kw))

    a, b = run(1), run(2)
    assert len(a) == 3
    for ga, gb in zip(a, b):
        assert all(torch.equal(ga[n], gb[n]) for n in ga)
    pa, pb = run(1, accounting="paper"), run(2, accounting="paper")
    assert any(not torch.equal(ga[n], gb[n]) for ga, gb in zip(pa, pb) for n in ga)


@pytest.mark.parametrize("cached", [False, True])
def test_maskdp_public_term_ignores_private_pixels_through_the_trainer(data, cached):
    """Invariant 2 through the trainer (clips, or features cached from them): the first step's
    public term is bit-identical when every private pixel changes. Feeding the unmasked clip (or
    the 'full' variant) to the public pass fails this."""
    train, _ = data
    changed = _PrivatePixelsChanged.of(train)
    assert not torch.equal(changed[0]["video"], train[0]["video"])
    terms = []
    for ds in (train, changed):
        model = build_action_model(3, arch="tiny", seed=4)
        if cached:
            cache = build_feature_cache(model, ds, variants=("private", "public"), batch_size=12)
            ds = cache.dataset(("private", "public"))
        terms.append(_public_terms(Trainer(model, ds, _dp_cfg("maskdp", epochs=1)), steps=1)[0])
    assert any(torch.count_nonzero(g) for g in terms[0].values())
    assert all(torch.equal(terms[0][n], terms[1][n]) for n in terms[0])


def test_fpdp_subspace_and_psi_term_come_from_public_data_through_the_trainer(data):
    """The subspace is the public set's (not the private batch's) and the public term is the
    gradient of psi(x) (the blurred clips) of the independent public batch, not of raw clips."""
    train, test = data
    model = build_action_model(3, arch="tiny", seed=5)
    t = Trainer(model, train, _dp_cfg("fpdp", epochs=1, lr=0.0, fpdp_refresh_every=100), public_data=test)
    start = {n: p.detach().clone() for n, p in t.params.items()}
    term = _public_terms(t, steps=1)[0]
    # the reference subspace: per-sample gradients of the public set at the starting parameters
    (sx, _), sy = t.strategy.public_set
    expected = PublicSubspace(4, 1)
    expected.update(flatten(per_sample_grads(t.net, sx, sy, start), batched=True))
    assert torch.equal(t.strategy.step_fn.subspace.basis, expected.basis)
    # the reference psi term: the first public draw of the trainer's public sampler, blurred
    from anonymask.models.training.action.trainer import _derived_seed
    from anonymask.models.training.privacy.sampler import PoissonBatchSampler

    idx = next(iter(PoissonBatchSampler(t.num_records, t.sample_rate, steps=1,
                                        seed=_derived_seed(t.public_seed, "public", 0))))  # fmt: skip
    raw = Collate(train.sample_shapes())([train[i] for i in idx])
    xb, _ = variant_input(raw["video"], "blur_1.5", None)
    xr = raw["video"]
    feats = t._run_prefix(xb, None)
    ref = summed_grads(t.net, feats, raw["label"], start)
    raw_term = summed_grads(t.net, t._run_prefix(xr, None), raw["label"], start)
    for n in ref:
        torch.testing.assert_close(term[n], ref[n], rtol=1e-5, atol=1e-7)
    assert any(not torch.allclose(term[n], raw_term[n], rtol=1e-3, atol=1e-6) for n in ref)


def test_several_clips_per_video_are_one_record(data, tmp_path):
    """With 3 clips per video the DP trainer samples videos (q = B / videos) and one clip of each:
    no step ever holds two clips of a video, and the report is per video."""
    train, _ = data
    multi = ClipDataset(train.store_url, "xsub", "train", "rend_diff", "r", **dict(CLIP, clips_per_video=3))
    t = Trainer(build_action_model(3, arch="tiny", seed=6), multi, _dp_cfg("dpsgd", epochs=3, batch_size=6))
    assert len(multi) == 36 and t.num_records == 12 and t.sample_rate == pytest.approx(0.5)
    seen_clips = set()
    for epoch in range(3):
        for raw, _ in t._batches(epoch):
            vids = list(raw["video_id"])
            assert len(vids) == len(set(vids))
            seen_clips |= set(zip(vids, raw["clip_index"].tolist()))
    assert len({c for _, c in seen_clips}) == 3  # every clip position gets used
    assert t.privacy_report()["record"] == "video"


def test_real_star_is_reported_as_not_private(data):
    train, _ = data
    real = ClipDataset(train.store_url, "xsub", "train", "real", "q", **CLIP)
    t = Trainer(build_action_model(3, arch="tiny", seed=7), real, _dp_cfg("maskdp", epochs=1))
    t.fit()
    rep = t.privacy_report()
    assert not rep["private"] and rep["epsilon"] == "inf" and "Real*" in rep["guarantee"]
    with pytest.raises(ValueError, match="variant 'real' only"):
        ClipDataset(train.store_url, "xsub", "train", "render", "q", **CLIP)
    # the person region is what Real* makes public
    item = real[0]
    assert item["pixel_public"].any() and not item["pixel_public"].all()


def test_a_smaller_public_batch_is_drawn_at_its_own_rate_and_divides_the_public_term(data):
    train, _ = data
    t = Trainer(build_action_model(3, arch="tiny", seed=8), train,
                _dp_cfg("maskdp", epochs=40, public_batch_size=1))  # fmt: skip
    assert t.strategy.expected_batch_size == pytest.approx(4) and t.strategy.expected_public_batch_size == pytest.approx(1)
    sizes = [(len(raw["label"]), len(pub["label"])) for e in range(40) for raw, pub in t._batches(e)]
    private, public = (sum(col) / len(sizes) for col in zip(*sizes))
    assert 3.3 < private < 4.7 and 0.7 < public < 1.3  # 120 steps: means within ~3 standard errors
    assert "expected size 1" in t.privacy_report()["public_term"]
    with pytest.raises(ValueError, match="public_batch_size must be unset"):
        _dp_cfg("maskdp", accounting="paper", public_batch_size=2)


@pytest.mark.parametrize(("mode", "private"), [("dpsgd", True), ("maskdp", False)])
def test_mask_q_voids_only_the_masked_modes(data, mode, private):
    """Issue 28 item 7: DP-SGD ignores the pixel mask (every pixel is private), so raw video with
    mask q is a private DP-SGD run; MaskDP with q (Real*) treats the real person as public."""
    train, _ = data
    real_q = ClipDataset(train.store_url, "xsub", "train", "real", "q", **CLIP)
    t = Trainer(build_action_model(3, arch="tiny", seed=8), real_q,
                _dp_cfg(mode, variant="real", mask_source="q", epochs=1))  # fmt: skip
    rep = t.privacy_report()
    assert rep["private"] is private and (rep["epsilon"] == "inf") is (not private)
