"""What each way of training protects: the ONE source of the README's table and of every run's
``guarantee`` sentence.

Why one source: a user choosing between DP-SGD and MaskDP must see that MaskDP's epsilon covers
only the real pixels of one video, while membership, the label, the motion and body shape (the
avatar comes from pose4d on the raw video) train noise-free. The table in README.md and
docs/ARCHITECTURE.md is ``protects_markdown()`` verbatim (a test checks it; ``python -m anonymask.models.training.privacy.protects README.md
docs/ARCHITECTURE.md`` rewrites them), and a run's report
names the protected and unprotected columns of its own row (``guarantee_scope``).

Epsilon is per record (a video): one person in k videos gets k-fold group privacy at best, so
"the same person across videos" is never covered at the nominal epsilon.
"""

from __future__ import annotations

#: the columns: what an adversary could learn about a person in the private training set
ASPECTS = (
    ("membership", "video membership"),
    ("label", "label"),
    ("pixels", "real pixels"),
    ("bystanders", "bystanders the anonymizer missed"),
    ("motion", "motion and shape"),
    ("across", "same person across videos"),
)

YES = "yes"
NO = "no"

#: row key -> (row label, {aspect: cell}); a cell starting with "yes" is protected at epsilon
PROTECTS: dict[str, tuple[str, dict[str, str]]] = {
    "dpsgd": ("DP-SGD (any data)", {
        "membership": YES, "label": YES, "pixels": YES, "bystanders": YES, "motion": YES,
        "across": "no (k videos: k x epsilon)",
    }),
    "maskdp_replace": ("MaskDP, replace (Render, mask r)", {
        "membership": "no (avatar tokens and label train noise-free)", "label": NO, "pixels": YES,
        "bystanders": YES, "motion": "no (the avatar is posed from the raw video)", "across": NO,
    }),
    "maskdp_add_remove": ("MaskDP, add/remove (Render, mask r)", {
        "membership": "no (avatar tokens and label train noise-free)", "label": NO, "pixels": YES,
        "bystanders": YES, "motion": "no (the avatar is posed from the raw video)", "across": NO,
    }),
    "maskdp_rend_diff": ("MaskDP on Rend.+Diff (mask r)", {
        "membership": NO, "label": NO,
        "pixels": "outside the avatar only: the refined avatar is computed from the raw crop (public by convention)",
        "bystanders": YES, "motion": NO, "across": NO,
    }),
    "fpdp": ("FP-DP (psi = paper's blur)", {
        "membership": "no (psi(x) and label train noise-free; holdout videos: nothing)", "label": NO,
        "pixels": "only the detail the blur removes", "bystanders": "only the detail the blur removes",
        "motion": "no (the blur keeps silhouette and motion)", "across": NO,
    }),
    "real_star": ("Real* (MaskDP, raw video, mask q)", {
        "membership": NO, "label": NO, "pixels": "no (the person's real pixels are public)",
        "bystanders": "yes (outside q)", "motion": NO, "across": NO,
    }),
    "render": ("Render, no DP (anonymization only)", {
        "membership": NO, "label": NO, "pixels": "by the anonymizer only (no epsilon)",
        "bystanders": NO, "motion": NO, "across": NO,
    }),
    "rend_diff": ("Rend.+Diff, no DP", {
        "membership": NO, "label": NO, "pixels": "by the anonymizer only; the refine sees the raw crop",
        "bystanders": NO, "motion": NO, "across": NO,
    }),
}  # fmt: skip


def protection_key(mode: str, adjacency: str = "add_remove", variant: str = "render", mask_source: str | None = None,
                   private: bool = True) -> str:  # fmt: skip
    """The table row of a run (HPE's projdp counts as DP-SGD, featdp as FP-DP)."""
    if mode in ("dpsgd", "projdp"):
        return "dpsgd"
    if mode in ("fpdp", "featdp"):
        return "fpdp"
    if mode == "maskdp":
        if mask_source == "q" or variant == "real":
            return "real_star"
        if variant == "rend_diff":
            return "maskdp_rend_diff"
        return "maskdp_replace" if adjacency == "replace" else "maskdp_add_remove"
    return "rend_diff" if variant == "rend_diff" else "render"


def guarantee_scope(key: str) -> str:
    """``protects: ...; partly: ...; not protected: ...`` of a row, for the run's guarantee sentence
    (a cell starting "yes" is protected, "no" is not, anything else is partial and quoted)."""
    _, cells = PROTECTS[key]
    yes = [name for aspect, name in ASPECTS if cells[aspect].startswith("yes")]
    no = [name for aspect, name in ASPECTS if cells[aspect].startswith("no")]
    partly = [f"{name} ({cells[aspect]})" for aspect, name in ASPECTS if not cells[aspect].startswith(("yes", "no"))]
    text = f"protects: {', '.join(yes) or 'nothing in full'}"
    if partly:
        text += f"; partly: {', '.join(partly)}"
    return text + f"; not protected: {', '.join(no) or 'nothing'}"


def write_docs(paths: list[str]) -> None:
    """Replace the table between the protects-table markers of each file (README, ARCHITECTURE)."""
    import re
    from pathlib import Path

    pattern = re.compile(r"(<!-- protects-table:start[^>]*-->\n).*?(<!-- protects-table:end -->)", re.S)
    for path in paths:
        text = Path(path).read_text()
        Path(path).write_text(pattern.sub(lambda m: m.group(1) + protects_markdown() + m.group(2), text))


def protects_markdown() -> str:
    """The "What each mode protects" table (README.md and docs/ARCHITECTURE.md hold it verbatim)."""
    head = "| training | " + " | ".join(name for _, name in ASPECTS) + " |"
    lines = [head, "|" + "---|" * (1 + len(ASPECTS))]
    for label, cells in PROTECTS.values():
        lines.append(f"| {label} | " + " | ".join(cells[a] for a, _ in ASPECTS) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    write_docs(sys.argv[1:])
