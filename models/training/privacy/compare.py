"""The MaskDP paper's privacy bound against sound analyses of the same noise, for one setting.

For each target epsilon, sigma is calibrated the paper's way (Theorem 1: RDP of the subsampled
Gaussian under add/remove with sensitivity C). With that sigma:

- ``masked add/remove``: the sound mechanism (public term on an independent batch) accounted
  under add/remove of one record's private tokens. Same numbers as the paper's bound: what the
  paper's proof needs is the independent public batch, not other noise.
- ``replace``: the sound mechanism under the paper's own Definition 2 (a record's private tokens
  substituted), which is a replace-one adjacency: the released sums differ by up to 2C.
- ``same batch``: the paper's Algorithm 2 as written (public term on the private batch), whose
  output reveals which steps sampled a record; no amplification by subsampling
  (``revealed_sampling_epsilon``).
- ``sigma for replace``: the noise the sound mechanism needs to meet the target under replace.

``anonymask privacy compare`` prints this table; docs/RESULTS.md quotes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from .accountant import epsilon, revealed_sampling_epsilon, sigma_for_epsilon


def bound_comparison(q: float, steps: int, delta: float, targets: Sequence[float]) -> list[dict[str, float]]:
    rows = []
    for target in targets:
        sigma = sigma_for_epsilon(q, steps, target, delta, "rdp")
        rows.append({
            "target_epsilon": float(target),
            "sigma_paper": sigma,
            "paper_bound_rdp": epsilon(q, sigma, steps, delta, "rdp"),
            "add_remove_pld": epsilon(q, sigma, steps, delta, "pld"),
            "replace_rdp": epsilon(q, sigma, steps, delta, "rdp", "replace"),
            "replace_pld": epsilon(q, sigma, steps, delta, "pld", "replace"),
            "same_batch_add_remove": revealed_sampling_epsilon(q, sigma, steps, delta, "add_remove"),
            "same_batch_replace": revealed_sampling_epsilon(q, sigma, steps, delta, "replace"),
            "sigma_replace_rdp": sigma_for_epsilon(q, steps, target, delta, "rdp", adjacency="replace"),
        })  # fmt: skip
    return rows


COLUMNS = [
    ("target_epsilon", "target eps"),
    ("sigma_paper", "sigma (paper's calibration)"),
    ("paper_bound_rdp", "paper's bound = sound, masked add/remove (RDP)"),
    ("add_remove_pld", "same, PLD"),
    ("replace_rdp", "sound, replace (Def. 2), RDP"),
    ("replace_pld", "same, PLD"),
    ("same_batch_add_remove", "paper's Algorithm 2 (same batch), add/remove"),
    ("same_batch_replace", "same batch, replace"),
    ("sigma_replace_rdp", "sigma for the target under replace (RDP)"),
]


def comparison_markdown(rows: list[dict[str, float]]) -> str:
    head = "| " + " | ".join(label for _, label in COLUMNS) + " |"
    lines = [head, "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[k]:.3g}" for k, _ in COLUMNS) + " |")
    return "\n".join(lines) + "\n"
