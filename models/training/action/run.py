"""One training run of the action model, end to end and without Prefect.

Data (the store's clips, or their cached prefix features), model, feature cache, fit (resumes from
the run's checkpoint), evaluation and the run's summary; the ``train`` flow wraps each step in a
Prefect task (tasks/train.py), tests and scripts call them directly. Every function takes the
run's ``TrainSettings``; files go through storage/runs.py.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anonymask.models.training.action.settings import Mode, TrainSettings
from anonymask.models.training.privacy.report import published_privacy
from anonymask.storage.runs import CHECKPOINT, METRICS, PRIVACY, RESULT, read_json, write_json

_LOG = logging.getLogger("anonymask.train")
MODE_LABELS = {"nonprivate": "Non-private", "dpsgd": "DP-SGD", "maskdp": "MaskDP", "fpdp": "FP-DP"}
ROW_LABELS = {"real": "Real", "render": "Render", "rend_diff": "Rend.+Diff"}


def row_label(variant: str, mask_source: str | None) -> str:
    """The paper's row names: Real, Real* (MaskDP on raw video with the person mask q), Render,
    Rend.+Diff."""
    label = ROW_LABELS.get(variant, variant)
    return label + "*" if variant == "real" and mask_source == "q" else label


def build_model(settings: TrainSettings, num_classes: int):
    from anonymask.models.training.action.mvit import build_action_model

    return build_action_model(
        num_classes,
        arch=settings.arch,
        weights=settings.weights,
        trainable=settings.trainable,
        clip_len=settings.clip_len,
        size=tuple(settings.size),
        seed=int(settings.model_seed),
        tiny_blocks=int(settings.tiny_blocks),
    )


def _public_videos(video_ids: list[str], fraction: float, seed: int) -> list[str]:
    """A fixed, seeded subset of the training videos declared public (FP-DP's holdout)."""
    n = min(max(1, round(fraction * len(video_ids))), max(len(video_ids) - 1, 1))
    ranked = sorted(video_ids, key=lambda v: hashlib.sha256(f"{seed}/{v}".encode()).hexdigest())
    return sorted(ranked[:n])


def clip_datasets(settings: TrainSettings, store_url: str) -> dict[str, Any]:
    """ClipDatasets of the run: ``train`` (private), ``eval`` and, for FP-DP, ``public``.

    FP-DP's public set is either a seeded ``holdout:<fraction>`` of the training videos (removed
    from the private set: a video is public or private, never both) or every video of another
    split (``split:<name>``).
    """
    from anonymask.models.training.action.clips import ClipDataset

    s = settings
    common = dict(clip_len=s.clip_len, frame_stride=s.frame_stride, size=tuple(s.size),
                  q_threshold=s.q_threshold)  # fmt: skip
    variant, mask = s.variant, s.mask
    train = ClipDataset(store_url, s.protocol, s.train_split, variant, mask,
                        clips_per_video=s.clips_per_video, **common)  # fmt: skip
    evald = ClipDataset(store_url, s.protocol, s.eval_split, variant, None,
                        clips_per_video=s.eval_clips_per_video, **common)  # fmt: skip
    out: dict[str, Any] = {"train": train, "eval": evald, "public": None}
    if s.mode == Mode.FPDP:  # fpdp_public is validated by TrainSettings
        kind, _, arg = s.fpdp_public.partition(":")
        if kind == "holdout":
            vids = sorted(train.video_labels)
            if len(vids) < 2:
                raise ValueError("FP-DP's holdout public set needs at least 2 training videos")
            public_ids = _public_videos(vids, float(arg or 0.1), int(s.seed))
            private_ids = [v for v in vids if v not in set(public_ids)]
            out["train"] = ClipDataset(store_url, s.protocol, s.train_split, variant, mask,
                                       clips_per_video=s.clips_per_video, video_ids=private_ids, **common)
            out["public"] = ClipDataset(store_url, s.protocol, s.train_split, variant, mask,
                                        clips_per_video=s.clips_per_video, video_ids=public_ids, **common)
        else:
            out["public"] = ClipDataset(store_url, s.protocol, arg, variant, mask,
                                        clips_per_video=s.clips_per_video, **common)
    return out


def unprotected_data(settings: TrainSettings, store_url: str) -> dict[str, Any]:
    """What the run uses raw and noise-free, named for the privacy report (DESIGN.md invariant 12):
    FP-DP's holdout videos (ids and count: they leave the private set and get NO protection), or
    the other split its public subspace comes from. Empty for the other modes."""
    s = settings
    if s.mode != Mode.FPDP:
        return {}
    kind, _, arg = s.fpdp_public.partition(":")
    why = "FP-DP's public set: used raw and noise-free for the gradient subspace, no privacy protection"
    if kind == "holdout":
        from anonymask.models.training.action.clips import ClipDataset

        train = ClipDataset(store_url, s.protocol, s.train_split, s.variant, s.mask, clip_len=s.clip_len,
                            frame_stride=s.frame_stride, size=tuple(s.size), q_threshold=s.q_threshold)  # fmt: skip
        ids = _public_videos(sorted(train.video_labels), float(arg or 0.1), int(s.seed))
        return {"unprotected_videos": ids, "unprotected_count": len(ids), "unprotected_source": s.fpdp_public,
                "unprotected_why": why}  # fmt: skip
    return {"unprotected_source": s.fpdp_public, "unprotected_why": why + f" (every video of split {arg!r}, "
            "none of them in the private training set)"}  # fmt: skip


def _num_classes(data: dict[str, Any]) -> int:
    return max(ds.num_classes for ds in data.values() if ds is not None)


def uses_cache(settings: TrainSettings, model) -> bool:
    return bool(settings.feature_cache) and model.split_index() > 0


def training_data(settings: TrainSettings, store_url: str, caches: dict[str, Any] | None):
    """(model, train, eval, public) datasets: cached prefix features when the cache exists."""
    from anonymask.models.training.action.feature_cache import FeatureCache

    data = clip_datasets(settings, store_url)
    model = build_model(settings, _num_classes(data))
    if not caches:
        return model, data["train"], data["eval"], data["public"]
    variants = {"train": settings.train_variants(), "eval": ("full",), "public": ("full",)}
    out = {}
    for name in ("train", "eval", "public"):
        key = caches.get(name)
        out[name] = FeatureCache(store_url, key).dataset(variants[name]) if key else data[name]
    return model, out["train"], out["eval"], out["public"]




def build_caches(settings: TrainSettings, store_url: str, logger: Any = _LOG) -> dict[str, Any]:
    """Frozen-prefix features of the train/eval/public clips in the store's cache (only what is
    missing is computed). Returns the cache keys, or {} when the run trains without a cache."""
    from anonymask.models.training.action.feature_cache import FeatureCache, build_feature_cache, cache_key

    data = clip_datasets(settings, store_url)
    model = build_model(settings, _num_classes(data))
    if not uses_cache(settings, model):
        logger.info("no feature cache (feature_cache=%s, split=%d)", settings.feature_cache, model.split_index())
        return {}
    import torch

    device = torch.device(settings.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    precision = "bfloat16" if device.type == "cuda" and settings.amp else "float32"
    variants = {"train": settings.train_variants(), "eval": ("full",), "public": ("full",)}
    keys: dict[str, Any] = {}
    for name, ds in data.items():
        if ds is None:
            keys[name] = None
            continue
        key = cache_key(model, ds, precision=precision, storage_dtype=settings.cache_dtype)
        try:
            complete = set(FeatureCache(store_url, key).complete_variants())
        except Exception:  # no cache group yet
            complete = set()
        todo = [v for v in variants[name] if v not in complete]
        t0 = time.perf_counter()
        if todo or (ds.mask_source is not None and "tokens" not in complete):
            build_feature_cache(model, ds, variants=variants[name], batch_size=int(settings.cache_batch_size),
                                num_workers=int(settings.num_workers), device=device, precision=precision,
                                storage_dtype=settings.cache_dtype, key=key)  # fmt: skip
            logger.info("cache %s (%s): %d clips, variants %s built in %.1fs", name, key[:12], len(ds), todo,
                        time.perf_counter() - t0)
        else:
            logger.info("cache %s (%s): reused (%d clips)", name, key[:12], len(ds))
        keys[name] = key
    return keys


class _ProgressBar:
    """tqdm bar over training steps with loss/accuracy (non-private only: in the DP modes the
    training loss is itself private), eval accuracy and epsilon spent."""

    def __init__(self, total: int, initial: int, desc: str, enabled: bool):
        self.bar = None
        self.last = initial
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True)
        self.postfix: dict[str, str] = {}

    def __call__(self, ev: dict[str, Any]) -> None:
        if self.bar is None:
            return
        step = int(ev.get("step", self.last))
        self.bar.update(max(step - self.last, 0))
        self.last = max(step, self.last)
        if "loss" in ev:
            self.postfix.update(loss=f"{ev['loss']:.3f}", acc=f"{ev['accuracy']:.3f}")
        if ev.get("event") == "epoch":
            self.postfix["epoch"] = str(ev["epoch"])
            if ev.get("eval", {}).get("top1") is not None:
                self.postfix["eval_top1"] = f"{ev['eval']['top1']:.3f}"
        if "epsilon" in ev:
            self.postfix["eps"] = f"{ev['epsilon']:.3g}"
        self.bar.set_postfix(self.postfix, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def fit_run(
    settings: TrainSettings,
    store_url: str,
    run_dir: str,
    caches: dict[str, Any],
    until_epoch: int | None = None,
    progress_bar: bool = False,
    on_progress: Callable[[float], None] | None = None,
    logger: Any = _LOG,
) -> dict[str, Any]:
    """Train to ``epochs`` from the run's checkpoint (if any); a checkpoint after every epoch.
    ``on_progress(percent)`` is called at the start and after every epoch."""
    from anonymask.models.training.action.trainer import Trainer

    run = Path(run_dir)
    ckpt = run / CHECKPOINT
    model, train_ds, eval_ds, public_ds = training_data(settings, store_url, caches)
    per_epoch_eval = int(settings.eval_every or 0) > 0
    trainer = Trainer(model, train_ds, settings, eval_data=eval_ds if per_epoch_eval else None,
                      public_data=public_ds, checkpoint_path=ckpt,
                      disclosures=unprotected_data(settings, store_url))  # fmt: skip
    resumed_from = 0
    if ckpt.is_file():
        trainer.load_checkpoint(ckpt)
        resumed_from = trainer.epoch
        logger.info("resuming %s from epoch %d (step %d)", run.name, trainer.epoch, trainer.step)
    epochs = int(settings.epochs)
    stop = epochs if until_epoch is None else min(int(until_epoch), epochs)
    if on_progress is not None:
        on_progress(100.0 * trainer.epoch / max(epochs, 1))
    bar = _ProgressBar(trainer.steps_per_epoch * stop, trainer.step, f"{settings.mode.value} {settings.dataset}",
                       progress_bar)  # fmt: skip

    def progress(ev: dict[str, Any]) -> None:
        bar(ev)
        if ev.get("event") == "epoch":
            if on_progress is not None:
                on_progress(100.0 * ev["epoch"] / max(epochs, 1))
            ev_top1 = (ev.get("eval") or {}).get("top1")
            logger.info("epoch %d/%d step %d%s%s", ev["epoch"], epochs, ev["step"],
                        f" eval top1 {ev_top1:.3f}" if ev_top1 is not None else "",
                        f" eps {ev['epsilon']:.3f}" if "epsilon" in ev else "")  # fmt: skip

    trainer.progress = progress
    t0 = time.perf_counter()
    try:
        if trainer.epoch < stop:
            trainer.fit(until_epoch=stop)
        elif not ckpt.is_file():
            trainer.save_checkpoint(ckpt)  # zero epochs: still leave a checkpoint to evaluate
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    return {
        "epochs_done": trainer.epoch,
        "epochs": epochs,
        "resumed_from_epoch": resumed_from,
        "epochs_run": trainer.epoch - resumed_from,
        "steps": trainer.step,
        "seconds": round(seconds, 3),
        "train_clips": len(train_ds),  # internal (benchmarks); never written to metrics.json (invariant 12)
        "public_clips": len(public_ds) if public_ds is not None else 0,
        "device": str(trainer.device),
        "complete": trainer.epoch >= epochs,
    }


def _checkpoint_state(path: Path) -> dict[str, Any]:
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def evaluate_run(settings: TrainSettings, store_url: str, run_dir: str, caches: dict[str, Any],
                 fit: dict[str, Any], logger: Any = _LOG) -> dict[str, Any]:  # fmt: skip
    """Metrics of the run's checkpoint on the eval split -> metrics.json + privacy.json.

    Skipped when metrics.json already describes this checkpoint (same settings and step).
    """
    import torch

    from anonymask.models.training.action.trainer import Trainer

    run = Path(run_dir)
    state = _checkpoint_state(run / CHECKPOINT)
    h = settings.run_hash()
    metrics_path = run / METRICS
    if metrics_path.is_file():
        old = read_json(metrics_path)
        if old.get("settings_hash") == h and old.get("steps") == int(state["step"]):
            logger.info("metrics of %s at step %d present: evaluation skipped", run.name, state["step"])
            return old
    model, _, eval_ds, _ = training_data(settings, store_url, caches)
    own = dict(model.named_parameters())
    with torch.no_grad():
        for name, t in state["trainable"].items():
            own[name].copy_(t)
    cfg = TrainSettings(mode=Mode.NONPRIVATE, batch_size=int(settings.eval_batch_size or settings.batch_size),
                        device=settings.device, amp=bool(settings.amp), num_workers=int(settings.num_workers))
    evaluator = Trainer(model, eval_ds, cfg)
    res = evaluator.evaluate(eval_ds)
    classes = _class_names(store_url, evaluator.num_classes)
    privacy = published_privacy(dict(state["privacy"]))  # the fingerprint stays in the checkpoint
    eps = privacy.get("epsilon")
    metrics = {
        "run": run.name,
        "dataset": settings.dataset,
        "mode": settings.mode.value,
        "variant": settings.variant,
        "mask_source": settings.mask,
        "row": row_label(settings.variant, settings.mask_source),
        "target_epsilon": settings.epsilon,
        "epsilon": eps,
        "epsilon_other": privacy.get("epsilon_other", {}),
        "accountant": privacy.get("accountant"),
        "adjacency": privacy.get("adjacency"),
        "accounting": privacy.get("accounting"),
        "private": privacy.get("private"),
        "guarantee": privacy.get("guarantee"),
        "delta": privacy.get("delta"),
        "sigma": privacy.get("sigma"),
        "seed": settings.seed,
        "top1": res["top1"],
        "mean_class_acc": res["mean_class_acc"],
        "clip_top1": res["clip_top1"],
        "per_class_acc": {classes[k]: a for k, a in enumerate(res["per_class_acc"])},
        "eval_videos": res["videos"],
        "eval_clips": res["clips"],
        "epochs": int(state["epoch"]),
        "complete": int(state["epoch"]) >= int(settings.epochs),
        "steps": int(state["step"]),
        "public_clips": fit.get("public_clips"),
        "device": fit.get("device"),
        "fit_seconds": fit.get("seconds"),
        "history": [
            {"epoch": r["epoch"], "top1": (r.get("eval") or {}).get("top1"), "epsilon": r.get("epsilon"),
             "train_loss": r.get("train_loss")}
            for r in state["history"]
        ],  # fmt: skip
        "settings_hash": h,
        "weights": state.get("weights_id"),
    }
    write_json(metrics_path, metrics)
    write_json(run / PRIVACY, dict(privacy, target_epsilon=settings.epsilon, run=run.name))
    return read_json(metrics_path)


def _class_names(store_url: str, n: int) -> list[str]:
    from anonymask.storage.store import DatasetStore

    names = list(DatasetStore.open(store_url, mode="r").classes)
    return names + [f"class{k}" for k in range(len(names), n)]


def _psi_text(psi: dict[str, Any] | None) -> str:
    if not psi:
        return "none"
    if psi.get("kind") == "gaussian_blur":
        weak = " (BELOW the paper's blur)" if psi.get("below_paper_floor") else ""
        return f"Gaussian blur, sigma {psi['sigma_px']:g} px at {psi['input_size'][0]}x{psi['input_size'][1]}{weak}"
    return str(psi.get("kind"))


def _unprotected_text(privacy: dict[str, Any]) -> str:
    d = privacy.get("disclosures") or {}
    if not d:
        return "none"
    if "unprotected_videos" in d:
        return f"{d['unprotected_count']} video(s) ({d['unprotected_source']}): {', '.join(d['unprotected_videos'])}"
    return str(d.get("unprotected_why") or d)


def result_markdown(metrics: dict[str, Any], privacy: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        return "n/a" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)

    others = ", ".join(f"{k}: {fmt(v)}" for k, v in (privacy.get("epsilon_other") or {}).items())
    lines = [
        f"# {metrics['run']}",
        "",
        f"{MODE_LABELS.get(metrics['mode'], metrics['mode'])} on {metrics['dataset']} "
        f"({metrics['row']}), {metrics['epochs']} epochs, {metrics['steps']} steps",
        "",
        "| metric | value |",
        "|---|---|",
        f"| top-1 | {fmt(metrics['top1'])} |",
        f"| mean per-class accuracy | {fmt(metrics['mean_class_acc'])} |",
        f"| clip top-1 | {fmt(metrics['clip_top1'])} |",
        f"| guarantee | {privacy.get('guarantee') or 'n/a'} |",
        f"| epsilon ({privacy.get('accountant')}) | {fmt(privacy.get('epsilon'))} |",
        f"| epsilon (other) | {others or 'n/a'} |",
        f"| target epsilon | {fmt(metrics['target_epsilon'])} |",
        f"| adjacency | {privacy.get('adjacency', 'n/a')} ({privacy.get('record', 'record')} level) |",
        f"| accounting | {privacy.get('accounting', 'n/a')} |",
        f"| delta | {fmt(privacy.get('delta'))} |",
        f"| sigma | {fmt(privacy.get('sigma'))} |",
        f"| q | {fmt(privacy.get('q'))} |",
        f"| steps | {fmt(privacy.get('steps'))} |",
        f"| C | {fmt(privacy.get('C'))} |",
        f"| public term | {privacy.get('public_term') or 'none'} |",
        f"| psi | {_psi_text(privacy.get('psi'))} |",
        f"| labels | {privacy.get('labels', 'n/a')} |",
        f"| mask policy | {privacy.get('mask_policy') or 'none'} |",
        f"| private | {privacy.get('private')} |",
        f"| used without protection | {_unprotected_text(privacy)} |",
        "",
        "| class | accuracy |",
        "|---|---|",
    ]
    lines += [f"| {k} | {fmt(v)} |" for k, v in metrics["per_class_acc"].items()]
    return "\n".join(lines) + "\n"


def write_result(run_dir: str, metrics: dict[str, Any]) -> tuple[str, str]:
    """result.md in the run folder; returns (path, markdown)."""
    run = Path(run_dir)
    md = result_markdown(metrics, read_json(run / PRIVACY))
    (run / RESULT).write_text(md)
    return str(run / RESULT), md


