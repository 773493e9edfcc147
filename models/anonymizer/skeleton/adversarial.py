"""Adversarial (minimax) training of a skeleton anonymizer, after Moon et al.

The anonymizer f minimises

    L_anon = CE(A(f(x)), y_action) - alpha * H(softmax(P(f(x)))) + beta * ||x - f(x)||^2

against a FROZEN action classifier A pre-trained on clean data (f must keep the action readable
for a model that never adapts to it), while the privacy classifier P (re-identification, gender)
keeps learning to predict the private label from f(x). H is the entropy of P's prediction: f is
rewarded for leaving P uncertain, not for making it confidently wrong (which would still leak).
Updates alternate: one step for f with P fixed, then ``privacy_steps`` steps for P on f(x) with f
fixed. Both classifiers are pre-trained on clean data first (:func:`pretrain_classifier`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

Labels = torch.Tensor | np.ndarray


def _as_tensor(a: Any, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a.to(device=device, dtype=dtype)
    return torch.as_tensor(np.asarray(a), dtype=dtype, device=device)


def _batches(n: int, batch_size: int, rng: np.random.Generator | None) -> Iterable[np.ndarray]:
    order = rng.permutation(n) if rng is not None else np.arange(n)
    for i in range(0, n, batch_size):
        yield order[i : i + batch_size]


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of softmax(logits) over the batch."""
    logp = F.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(dim=-1).mean()


def reconstruction_error(x: torch.Tensor, x_anon: torch.Tensor) -> torch.Tensor:
    """Mean squared joint displacement ||x - f(x)||^2 (squared metres per joint per frame)."""
    return (x - x_anon).pow(2).sum(dim=-1).mean()


def anonymizer_loss(
    action_logits: torch.Tensor,
    y_action: torch.Tensor,
    privacy_logits: torch.Tensor | Mapping[str, torch.Tensor],
    x: torch.Tensor,
    x_anon: torch.Tensor,
    alpha: float,
    beta: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The anonymizer's objective CE(action) - alpha * H(privacy) + beta * ||x - f(x)||^2.

    ``privacy_logits`` may hold several heads (e.g. {"reid": ..., "gender": ...}); their entropies
    add up. Returns the loss tensor and its terms as floats.
    """
    heads = privacy_logits if isinstance(privacy_logits, Mapping) else {"privacy": privacy_logits}
    ce = F.cross_entropy(action_logits, y_action)
    ent = {name: entropy(logits) for name, logits in heads.items()}
    h = torch.stack(list(ent.values())).sum() if ent else action_logits.new_zeros(())
    rec = reconstruction_error(x, x_anon)
    loss = ce - alpha * h + beta * rec
    parts = {"anon_loss": loss.item(), "action_ce": ce.item(), "entropy": h.item(), "recon": rec.item()}
    parts.update({f"entropy_{k}": v.item() for k, v in ent.items()})
    return loss, parts


def freeze(model: nn.Module) -> nn.Module:
    """Evaluation mode and no gradients: a frozen model's parameters AND statistics stay put."""
    model.eval()
    model.requires_grad_(False)
    return model


@torch.no_grad()
def recalibrate_batchnorm(model: nn.Module, batches: Iterable[torch.Tensor], device: str | torch.device = "cpu") -> None:
    """Set BatchNorm running statistics to the exact averages over ``batches`` (the final weights).

    With few training steps the momentum averages still remember the random init and earlier
    weights, and evaluation-mode predictions suffer; one pass in training mode fixes that.
    """
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    saved = [(m, m.momentum) for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    model.eval()
    for m in norms:
        m.train()
    for xb in batches:
        if len(xb) > 1:
            model(xb.to(device, torch.float32))
    for m, momentum in saved:
        m.momentum = momentum
    model.eval()


def pretrain_classifier(
    model: nn.Module,
    x: np.ndarray | torch.Tensor | DataLoader,
    y: Labels | None = None,
    *,
    epochs: int = 10,
    lr: float = 1e-3,
    batch_size: int = 32,
    weight_decay: float = 1e-4,
    label_index: int = 1,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> list[dict[str, float]]:
    """Train ``model`` with cross-entropy; returns per-epoch {"epoch", "loss", "acc"}.

    Data: arrays ``x`` (N,T,J,3) with labels ``y`` (N,), or a DataLoader whose batches are tuples
    (x, ...) with the label at ``label_index`` (1 action, 2 subject, 3 gender for
    :class:`SkeletonDataset`). Labels of -1 (unknown) are ignored. ``transform`` is applied to each
    batch first (e.g. an anonymizer, to train an attacker on anonymized data).
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(epochs, 1))
    if isinstance(x, DataLoader):
        loader = x

        def batches() -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
            for batch in loader:
                yield batch[0], batch[label_index]
    else:
        if y is None:
            raise ValueError("labels y are required with array data")
        xt = _as_tensor(x, torch.float32, "cpu")
        yt = _as_tensor(y, torch.long, "cpu")
        if len(xt) != len(yt):
            raise ValueError(f"{len(xt)} sequences but {len(yt)} labels")

        def batches() -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
            for idx in _batches(len(xt), batch_size, rng):
                if len(idx) > 1 or len(xt) == 1:  # BatchNorm needs two samples
                    yield xt[idx], yt[idx]

    history = []
    for epoch in range(epochs):
        total, correct, count, stepped = 0.0, 0, 0, False
        for xb, yb in batches():
            xb, yb = xb.to(device, torch.float32), yb.to(device, torch.long)
            if transform is not None:
                with torch.no_grad():
                    xb = transform(xb)
            valid = yb >= 0
            if not valid.any():
                continue
            logits = model(xb)
            loss = F.cross_entropy(logits[valid], yb[valid])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * int(valid.sum())
            stepped = True
            correct += int((logits[valid].argmax(-1) == yb[valid]).sum())
            count += int(valid.sum())
        if stepped:
            sched.step()
        history.append({"epoch": epoch, "loss": total / max(count, 1), "acc": correct / max(count, 1)})
    if epochs > 0:
        def inputs() -> Iterable[torch.Tensor]:
            for xb, _ in batches():
                xb = xb.to(device, torch.float32)
                yield transform(xb) if transform is not None else xb

        recalibrate_batchnorm(model, inputs(), device)
    model.eval()
    return history


@torch.no_grad()
def predict(model: nn.Module, x: np.ndarray | torch.Tensor, batch_size: int = 256, device: str | torch.device = "cpu") -> np.ndarray:
    """Logits (N, classes) in evaluation mode."""
    was_training = model.training
    model.to(device).eval()
    xt = _as_tensor(x, torch.float32, "cpu")
    out = [model(xt[i : i + batch_size].to(device)).cpu() for i in range(0, len(xt), batch_size)]
    model.train(was_training)
    return torch.cat(out).numpy() if out else np.zeros((0, 0), np.float32)


def accuracy(model: nn.Module, x: np.ndarray | torch.Tensor, y: Labels, batch_size: int = 256, device: str | torch.device = "cpu") -> float:
    """Top-1 accuracy over the samples whose label is known (>= 0)."""
    y = np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y)
    valid = y >= 0
    if not valid.any():
        return float("nan")
    pred = predict(model, np.asarray(x)[valid] if not isinstance(x, torch.Tensor) else x[torch.as_tensor(valid)], batch_size, device).argmax(-1)
    return float((pred == y[valid]).mean())


class AdversarialTrainer:
    """Alternating minimax updates of an anonymizer against privacy classifier(s).

    privacy_clf: one classifier or a dict of them (e.g. {"reid": ..., "gender": ...}); the private
    labels passed to :meth:`step` then are a tensor or a dict with the same keys. The action
    classifier is frozen here (parameters, BatchNorm statistics) and never updated.
    """

    def __init__(
        self,
        anonymizer: nn.Module,
        action_clf: nn.Module,
        privacy_clf: nn.Module | Mapping[str, nn.Module],
        alpha: float = 1.0,
        beta: float = 1.0,
        lr_anon: float = 1e-3,
        lr_priv: float = 1e-3,
        *,
        privacy_steps: int = 1,
        device: str | torch.device = "cpu",
    ):
        self.device = torch.device(device)
        self.anonymizer = anonymizer.to(self.device)
        self.action_clf = freeze(action_clf.to(self.device))
        self.single_head = not isinstance(privacy_clf, Mapping)
        self.privacy = dict(privacy_clf) if isinstance(privacy_clf, Mapping) else {"privacy": privacy_clf}
        for clf in self.privacy.values():
            clf.to(self.device)
        self.alpha, self.beta = float(alpha), float(beta)
        self.privacy_steps = privacy_steps
        self.opt_anon = torch.optim.Adam(self.anonymizer.parameters(), lr=lr_anon)
        self.opt_priv = torch.optim.Adam([p for c in self.privacy.values() for p in c.parameters()], lr=lr_priv)

    def _private(self, y_private: Labels | Mapping[str, Labels]) -> dict[str, torch.Tensor]:
        if self.single_head and not isinstance(y_private, Mapping):
            y_private = {"privacy": y_private}
        if not isinstance(y_private, Mapping) or set(y_private) != set(self.privacy):
            raise ValueError(f"private labels must be given for exactly {sorted(self.privacy)}")
        return {k: _as_tensor(v, torch.long, self.device) for k, v in y_private.items()}

    def anonymizer_step(self, x: torch.Tensor, y_action: torch.Tensor) -> dict[str, float]:
        """One update of f with the privacy classifier(s) held fixed."""
        self.anonymizer.train()
        for clf in self.privacy.values():
            clf.eval()
        x_anon = self.anonymizer(x)
        logits = {k: clf(x_anon) for k, clf in self.privacy.items()}
        loss, parts = anonymizer_loss(self.action_clf(x_anon), y_action, logits, x, x_anon, self.alpha, self.beta)
        self.opt_anon.zero_grad(set_to_none=True)
        loss.backward()
        self.opt_anon.step()
        for clf in self.privacy.values():  # they got gradients through the loss; not theirs to use
            clf.zero_grad(set_to_none=True)
        return parts

    def privacy_step(self, x: torch.Tensor, y_private: Labels | Mapping[str, Labels]) -> dict[str, float]:
        """One update of the privacy classifier(s) on f(x) with f held fixed."""
        labels = self._private(y_private)
        with torch.no_grad():
            self.anonymizer.eval()
            x_anon = self.anonymizer(x)
            self.anonymizer.train()
        parts: dict[str, float] = {}
        total = x.new_zeros(())
        for k, clf in self.privacy.items():
            clf.train()
            y = labels[k]
            valid = y >= 0
            if not valid.any():
                continue
            logits = clf(x_anon)
            ce = F.cross_entropy(logits[valid], y[valid])
            total = total + ce
            parts[f"privacy_ce_{k}"] = ce.item()
            parts[f"privacy_acc_{k}"] = (logits[valid].argmax(-1) == y[valid]).float().mean().item()
        if total.requires_grad:
            self.opt_priv.zero_grad(set_to_none=True)
            total.backward()
            self.opt_priv.step()
        parts["privacy_ce"] = total.item()
        return parts

    def step(self, x: Labels, y_action: Labels, y_private: Labels | Mapping[str, Labels]) -> dict[str, float]:
        """One alternating round: an anonymizer update, then ``privacy_steps`` privacy updates."""
        xt = _as_tensor(x, torch.float32, self.device)
        parts = self.anonymizer_step(xt, _as_tensor(y_action, torch.long, self.device))
        for _ in range(self.privacy_steps):
            parts.update(self.privacy_step(xt, y_private))
        return parts

    def fit(
        self,
        x: np.ndarray,
        y_action: np.ndarray,
        y_private: np.ndarray | Mapping[str, np.ndarray],
        *,
        epochs: int = 10,
        batch_size: int = 32,
        seed: int = 0,
    ) -> list[dict[str, float]]:
        """Run :meth:`step` over shuffled batches; returns the per-epoch means of the terms."""
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        x = np.asarray(x, np.float32)
        y_action = np.asarray(y_action)
        priv = {k: np.asarray(v) for k, v in y_private.items()} if isinstance(y_private, Mapping) else np.asarray(y_private)
        history = []
        for epoch in range(epochs):
            sums: dict[str, float] = {}
            n = 0
            for idx in _batches(len(x), batch_size, rng):
                if len(idx) < 2:  # BatchNorm in the classifiers needs two samples
                    continue
                yp = {k: v[idx] for k, v in priv.items()} if isinstance(priv, dict) else priv[idx]
                parts = self.step(x[idx], y_action[idx], yp)
                for k, v in parts.items():
                    sums[k] = sums.get(k, 0.0) + v * len(idx)
                n += len(idx)
            history.append({"epoch": epoch, **{k: v / max(n, 1) for k, v in sums.items()}})
        self.anonymizer.eval()
        return history
