"""Evaluation of skeleton anonymization as in Moon et al., and the experiment entry point.

A method (no anonymization, Gaussian noise at several sigma, the adversarial anonymizer at several
alpha/beta) is judged by models that played no part in making it: a fresh action classifier and
fresh privacy classifiers (re-identification, gender) are trained on the method's anonymized
TRAINING sequences and tested on its anonymized TEST sequences. An attacker that adapts to the
anonymization is the realistic threat; accuracies of the clean-trained (frozen) classifiers on the
anonymized test set are reported too (``*_frozen``). Reconstruction error is the mean joint
displacement between the original and the anonymized test sequences, in the data's units (metres).

Selection rule for the trade-off sweep: ``score = action_acc * (1 - reid_acc)``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from anonymask.models.anonymizer.skeleton.adversarial import AdversarialTrainer, accuracy, pretrain_classifier
from anonymask.models.anonymizer.skeleton.anonymizers import anonymize_array, build_anonymizer
from anonymask.models.anonymizer.skeleton.classifiers import SkeletonClassifier
from anonymask.models.anonymizer.skeleton.data import (
    SkeletonArrays,
    normalize_sequence,
    split_by_sequence,
    to_length,
)
from anonymask.models.anonymizer.skeleton.graphs import SkeletonGraph, get_graph, retarget_bone_lengths

# ----------------------------------------------------------------------------- metrics and rules


def gaussian_noise(x: np.ndarray, sigma: float, seed: int = 0) -> np.ndarray:
    """The baseline anonymizer: i.i.d. N(0, sigma^2) added to every coordinate."""
    rng = np.random.default_rng(seed)
    return (x + rng.normal(0.0, sigma, np.shape(x))).astype(np.float32)


def mean_joint_displacement(x: np.ndarray, x_anon: np.ndarray) -> float:
    """Mean Euclidean distance between corresponding joints (data units, metres here)."""
    return float(np.linalg.norm(np.asarray(x) - np.asarray(x_anon), axis=-1).mean())


def bone_length_attack(train: SkeletonArrays, test: SkeletonArrays, graph: SkeletonGraph) -> float:
    """Re-identification accuracy of a transparent attacker: nearest subject centroid of the mean
    bone lengths. Body proportions are the strongest static identity cue; this attacker needs no
    training and cannot be fooled by perturbations that leave the proportions intact."""
    f_train = graph.bone_lengths(train.x).mean(axis=1)
    f_test = graph.bone_lengths(test.x).mean(axis=1)
    subjects = np.unique(train.subject)
    centroids = np.stack([f_train[train.subject == k].mean(axis=0) for k in subjects])
    nearest = subjects[np.argmin(((f_test[:, None] - centroids[None]) ** 2).sum(-1), axis=1)]
    return float((nearest == test.subject).mean())


def selection_score(row: dict[str, Any]) -> float:
    """The paper's trade-off rule: action accuracy times (1 - re-identification accuracy)."""
    return float(row["action_acc"]) * (1.0 - float(row["reid_acc"]))


def select_best(results: Sequence[dict[str, Any]], method: str | None = "adversarial") -> dict[str, Any]:
    """The row with the highest :func:`selection_score` (among ``method`` rows, or all if None)."""
    rows = [r for r in results if method is None or r.get("method") == method]
    if not rows:
        raise ValueError(f"no results with method {method!r}")
    return max(rows, key=selection_score)


# ----------------------------------------------------------------------------- evaluation


@dataclass
class ClassifierConfig:
    """How every classifier of an experiment is built and trained (one place, same for all)."""

    channels: tuple[int, ...] = (16, 32)
    temporal_kernel: int = 5
    dropout: float = 0.1
    epochs: int = 20
    lr: float = 3e-3
    batch_size: int = 32


def make_classifier(num_joints: int, num_classes: int, graph: SkeletonGraph | None, cfg: ClassifierConfig, seed: int) -> SkeletonClassifier:
    torch.manual_seed(seed)
    return SkeletonClassifier(
        num_joints, num_classes, graph, channels=cfg.channels, temporal_kernel=cfg.temporal_kernel, dropout=cfg.dropout
    )


def _label_sets(data: SkeletonArrays, num_subjects: int, num_actions: int) -> dict[str, tuple[np.ndarray, int]]:
    sets = {"action": (data.action, num_actions), "reid": (data.subject, num_subjects)}
    if (data.gender >= 0).any():
        sets["gender"] = (data.gender, 2)
    return sets


def evaluate_anonymized(
    train: SkeletonArrays,
    test: SkeletonArrays,
    test_original: np.ndarray,
    *,
    num_actions: int,
    num_subjects: int,
    graph: SkeletonGraph | None = None,
    config: ClassifierConfig | None = None,
    frozen: dict[str, torch.nn.Module] | None = None,
    seed: int = 1000,
    device: str | torch.device = "cpu",
) -> dict[str, float]:
    """Accuracies of independent classifiers trained on ``train`` and tested on ``test`` (both
    already anonymized the same way), the reconstruction error against ``test_original``, and
    the accuracies of the ``frozen`` clean-trained classifiers on ``test`` (keys ``*_frozen``) and,
    with a graph, the bone-length attacker's accuracy (``reid_acc_bones``)."""
    cfg = config or ClassifierConfig()
    j = train.x.shape[2]
    out: dict[str, float] = {}
    for i, (name, (labels, classes)) in enumerate(_label_sets(train, num_subjects, num_actions).items()):
        clf = make_classifier(j, classes, graph, cfg, seed + i)
        pretrain_classifier(
            clf, train.x, labels, epochs=cfg.epochs, lr=cfg.lr, batch_size=cfg.batch_size, seed=seed + i, device=device
        )
        test_labels = {"action": test.action, "reid": test.subject, "gender": test.gender}[name]
        out[f"{name}_acc"] = accuracy(clf, test.x, test_labels, device=device)
    for name, clf in (frozen or {}).items():
        test_labels = {"action": test.action, "reid": test.subject, "gender": test.gender}[name]
        out[f"{name}_acc_frozen"] = accuracy(clf, test.x, test_labels, device=device)
    if graph is not None:
        out["reid_acc_bones"] = bone_length_attack(train, test, graph)
    out["recon_error"] = mean_joint_displacement(test_original, test.x)
    return out


# ----------------------------------------------------------------------------- experiment


def _prepare(
    sequences: Sequence[np.ndarray] | np.ndarray, length: int, root_joint: int, align_hips: tuple[int, int] | None
) -> np.ndarray:
    out = []
    for s in sequences:
        s = np.asarray(s, np.float32)
        s, _ = normalize_sequence(s, root_joint, align_hips=align_hips)
        out.append(to_length(s, length, "crop"))
    return np.stack(out)


def build_anonymizer_for(kind: str, num_joints: int, options: dict[str, Any] | None, seed: int) -> torch.nn.Module:
    """A fresh anonymizer of ``kind`` ("mlp" or "unet"), seeded."""
    torch.manual_seed(seed)
    return build_anonymizer({"kind": kind, "num_joints": num_joints, **(options or {})})


def run_skeleton_experiment(
    sequences: Sequence[np.ndarray] | np.ndarray,
    actions: Sequence[int] | np.ndarray,
    subjects: Sequence[Any] | np.ndarray,
    genders: Sequence[int] | np.ndarray | None = None,
    *,
    alphas: Sequence[float] = (1.0,),
    betas: Sequence[float] = (10.0,),
    sigmas: Sequence[float] = (0.02, 0.05, 0.1),
    retarget: bool = True,
    epochs: int = 20,
    adv_epochs: int | None = None,
    seed: int = 0,
    length: int = 32,
    split: tuple[np.ndarray, np.ndarray] | None = None,
    test_fraction: float = 0.25,
    root_joint: int | None = None,
    align_hips: tuple[int, int] | None | str = "auto",
    graph: SkeletonGraph | str | None = None,
    anonymizer: str = "mlp",
    anonymizer_options: dict[str, Any] | None = None,
    private: Sequence[str] = ("reid", "gender"),
    lr_anon: float = 1e-3,
    lr_priv: float = 1e-3,
    privacy_steps: int = 1,
    classifier: ClassifierConfig | None = None,
    keep_states: bool = False,
    log: Callable[[str], None] | None = None,
    device: str | torch.device = "cpu",
) -> list[dict[str, Any]]:
    """Train and evaluate skeleton anonymization on one dataset; returns one dict per method.

    sequences: (T_i, J, 3) joint tracks (any lengths; normalised and cropped to ``length``),
    actions: 0-based labels, subjects: any ids (mapped to 0..K-1), genders: 0/1 or -1 (optional).
    Split: ``split=(train_idx, test_idx)`` or a per-(subject, action) split with every subject on
    both sides (:func:`split_by_sequence`). Steps: pre-train the action and privacy classifiers on
    clean training data; evaluate "original", Gaussian noise at each sigma and (with a graph,
    ``retarget``) every sequence retargeted to the training set's mean bone lengths; for each
    (alpha, beta) train an anonymizer by minimax (:class:`AdversarialTrainer`) against copies of the
    pre-trained privacy classifiers, then evaluate it (:func:`evaluate_anonymized`).

    Rows: method, name, alpha, beta, sigma, action_acc, reid_acc, gender_acc (if genders),
    recon_error, *_acc_frozen, score, seconds, and for adversarial rows ``anonymizer_config``
    and ``normalization`` (+ ``anonymizer_state`` if ``keep_states``; save it with
    :func:`~anonymask.models.anonymizer.skeleton.anonymizers.save_anonymizer`).
    """
    t_start = time.time()
    say = log or (lambda _msg: None)
    cfg = classifier or ClassifierConfig()
    adv_epochs = epochs if adv_epochs is None else adv_epochs
    num_joints = int(np.shape(sequences[0])[1])
    g = get_graph(graph, num_joints)
    if root_joint is None:
        root_joint = g.root if g is not None else 0
    if align_hips == "auto":
        align_hips = (g.left_hip, g.right_hip) if g is not None and g.left_hip is not None else None
    x = _prepare(sequences, length, root_joint, align_hips)  # type: ignore[arg-type]
    actions = np.asarray(actions, np.int64)
    subject_ids = sorted(set(np.asarray(subjects).tolist()))
    subj = np.array([subject_ids.index(s) for s in np.asarray(subjects).tolist()], np.int64)
    gend = np.full(len(x), -1, np.int64) if genders is None else np.asarray(genders, np.int64)
    data = SkeletonArrays(x, actions, subj, gend)
    num_actions, num_subjects = int(actions.max()) + 1, len(subject_ids)
    train_idx, test_idx = split if split is not None else split_by_sequence(subj, actions, test_fraction, seed)
    train, test = data.subset(np.asarray(train_idx)), data.subset(np.asarray(test_idx))
    say(f"skeleton experiment: {len(train)} train / {len(test)} test sequences, {num_subjects} subjects, "
        f"{num_actions} actions, J={num_joints}, T={length}")

    # Pre-train on clean data: the frozen action classifier and the starting privacy classifiers.
    labels = _label_sets(train, num_subjects, num_actions)
    pretrained: dict[str, torch.nn.Module] = {}
    for i, (name, (y, classes)) in enumerate(labels.items()):
        clf = make_classifier(num_joints, classes, g, cfg, seed + i)
        pretrain_classifier(
            clf, train.x, y, epochs=cfg.epochs, lr=cfg.lr, batch_size=cfg.batch_size, seed=seed + i, device=device
        )
        pretrained[name] = clf
    say("pre-trained " + ", ".join(pretrained))

    def evaluate(name: str, tr: SkeletonArrays, te: SkeletonArrays, **row: Any) -> dict[str, Any]:
        t0 = time.time()
        metrics = evaluate_anonymized(
            tr, te, test.x, num_actions=num_actions, num_subjects=num_subjects, graph=g, config=cfg,
            frozen=pretrained, seed=seed + 1000, device=device,
        )
        out = {"method": row.pop("method"), "name": name, "alpha": None, "beta": None, "sigma": None, **row, **metrics}
        out["score"] = selection_score(out)
        out["seconds"] = round(time.time() - t0 + out.pop("_extra_seconds", 0.0), 2)
        say(f"{name}: action {out['action_acc']:.3f} re-ID {out['reid_acc']:.3f}"
            + (f" gender {out['gender_acc']:.3f}" if "gender_acc" in out else "")
            + f" recon {out['recon_error']:.4f} score {out['score']:.3f}")
        return out

    results = [evaluate("original", train, test, method="original")]
    for k, sigma in enumerate(sigmas):
        tr = SkeletonArrays(gaussian_noise(train.x, sigma, seed + 10 + 2 * k), train.action, train.subject, train.gender)
        te = SkeletonArrays(gaussian_noise(test.x, sigma, seed + 11 + 2 * k), test.action, test.subject, test.gender)
        results.append(evaluate(f"gaussian sigma={sigma:g}", tr, te, method="gaussian", sigma=float(sigma)))
    if retarget and g is not None:
        template = g.bone_lengths(train.x).mean(axis=(0, 1))
        tr = SkeletonArrays(retarget_bone_lengths(train.x, g, template), train.action, train.subject, train.gender)
        te = SkeletonArrays(retarget_bone_lengths(test.x, g, template), test.action, test.subject, test.gender)
        results.append(evaluate("retarget to mean skeleton", tr, te, method="retarget"))

    heads = [h for h in private if h in pretrained and h != "action"]
    for alpha in alphas:
        for beta in betas:
            t0 = time.time()
            anon = build_anonymizer_for(anonymizer, num_joints, anonymizer_options, seed)
            privacy = {h: copy.deepcopy(pretrained[h]) for h in heads}
            trainer = AdversarialTrainer(
                anon, copy.deepcopy(pretrained["action"]), privacy, alpha, beta, lr_anon, lr_priv, privacy_steps=privacy_steps,
                device=device,
            )
            y_private = {"reid": train.subject, "gender": train.gender}
            history = trainer.fit(
                train.x, train.action, {h: y_private[h] for h in heads}, epochs=adv_epochs, batch_size=cfg.batch_size, seed=seed
            )
            tr = SkeletonArrays(anonymize_array(anon, train.x), train.action, train.subject, train.gender)
            te = SkeletonArrays(anonymize_array(anon, test.x), test.action, test.subject, test.gender)
            row: dict[str, Any] = {
                "method": "adversarial", "alpha": float(alpha), "beta": float(beta),
                "anonymizer_config": dict(anon.config), "train_history": history[-1] if history else {},
                "normalization": {"root_joint": root_joint, "align_hips": list(align_hips) if align_hips else None},
                "_extra_seconds": time.time() - t0,
            }
            if keep_states:
                row["anonymizer_state"] = {k: v.detach().cpu().clone() for k, v in anon.state_dict().items()}
            results.append(evaluate(f"adversarial alpha={alpha:g} beta={beta:g}", tr, te, **row))
    say(f"skeleton experiment done in {time.time() - t_start:.0f}s")
    return results


# ----------------------------------------------------------------------------- reporting


def results_table_markdown(results: Sequence[dict[str, Any]], best: dict[str, Any] | None = None) -> str:
    """A Markdown table of the rows; the best adversarial row (selection rule) is marked."""
    if best is None and any(r.get("method") == "adversarial" for r in results):
        best = select_best(results)
    has_gender = any("gender_acc" in r for r in results)
    cols = ["method", "alpha", "beta", "sigma", "action acc", "re-ID acc"] + (["gender acc"] if has_gender else [])
    has_bones = any("reid_acc_bones" in r for r in results)
    cols += ["re-ID acc (frozen)"] + (["re-ID acc (bones)"] if has_bones else []) + ["recon (m)", "score"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]

    def fmt(v: Any, digits: int = 3) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return "nan" if np.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    for r in results:
        name = r.get("method", "") + (" **(best)**" if best is not None and r is best else "")
        cells = [name, fmt(r.get("alpha"), 3), fmt(r.get("beta"), 3), fmt(r.get("sigma"), 3),
                 fmt(r.get("action_acc")), fmt(r.get("reid_acc"))]
        if has_gender:
            cells.append(fmt(r.get("gender_acc")))
        cells.append(fmt(r.get("reid_acc_frozen")))
        if has_bones:
            cells.append(fmt(r.get("reid_acc_bones")))
        cells += [fmt(r.get("recon_error"), 4), fmt(selection_score(r))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_tradeoff(results: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Two panels per row of results: re-identification accuracy (lower = more private) against
    action accuracy (higher = more useful), and against reconstruction error (the price paid in
    joint displacement). Points are labelled by sigma or alpha/beta; the selected row is circled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax_use, ax_rec) = plt.subplots(1, 2, figsize=(11, 4.5))
    styles = {
        "original": ("k", "*"), "gaussian": ("tab:blue", "s"), "retarget": ("tab:purple", "D"), "adversarial": ("tab:red", "o"),
    }
    best = select_best(results) if any(r.get("method") == "adversarial" for r in results) else None
    for method, (color, marker) in styles.items():
        rows = [r for r in results if r.get("method") == method]
        if not rows:
            continue
        reid = [r["reid_acc"] for r in rows]
        ax_use.scatter(reid, [r["action_acc"] for r in rows], c=color, marker=marker, s=60, label=method, alpha=0.8)
        ax_rec.scatter([r["recon_error"] for r in rows], reid, c=color, marker=marker, s=60, label=method, alpha=0.8)
        for r in rows:
            if method == "gaussian":
                tag = f"σ={r['sigma']:g}"
            elif method == "adversarial":
                tag = f"α={r['alpha']:g},β={r['beta']:g}"
            else:
                continue
            ax_rec.annotate(tag, (r["recon_error"], r["reid_acc"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    if best is not None:
        ax_use.scatter([best["reid_acc"]], [best["action_acc"]], s=250, facecolors="none", edgecolors="g", linewidths=2, label="selected")
        ax_rec.scatter([best["recon_error"]], [best["reid_acc"]], s=250, facecolors="none", edgecolors="g", linewidths=2)
    ax_use.set_xlabel("re-identification accuracy (lower = more private)")
    ax_use.set_ylabel("action accuracy (higher = more useful)")
    ax_use.set_xlim(-0.02, 1.02)
    ax_use.set_ylim(-0.02, 1.02)
    ax_use.legend(fontsize=8, loc="lower left")
    ax_rec.set_xlabel("reconstruction error: mean joint displacement (m)")
    ax_rec.set_ylabel("re-identification accuracy")
    ax_rec.set_ylim(-0.02, 1.02)
    for ax in (ax_use, ax_rec):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
