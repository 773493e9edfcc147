"""How far the avatars put their joints from the people's own, per video of stores with ground truth.

    .venv/bin/python scripts/avatar_joint_error.py STORE [STORE ...]
    .venv/bin/python scripts/avatar_joint_error.py --fit STORE [STORE ...]

For each video with ``gt/joints2d`` (the synthetic generator's data) and a render, the median over
person-frames of the mean body-joint distance between a person and the avatar drawn on them, and
the same over the head and wrists, in % of the person's 2-D height
(models/anonymizer/metrics.py ``avatar_joint_errors``, the render stage's
``avatar_joint_err`` / ``avatar_ends_err``). With several stores of the same videos (old and new
code) the rows read left to right, and the last lines give each store's mean over the videos all
of them have.

``--fit`` works on any store, real footage included: the distance between the avatar's joints and
the fitted person's own (pose4d's track posed and projected with its own, neutral, shape), which is
what the avatar's body shape alone moves (``render.skeleton_tol_m``), same units.
"""

from __future__ import annotations

import sys

import numpy as np


def video_errors(entry) -> tuple[float, float, int] | None:
    from anonymask.models.anonymizer.metrics import avatar_joint_errors

    if not entry.has_array("gt/joints2d") or not entry.has_array("render/joints2d"):
        return None
    body, ends = avatar_joint_errors(np.asarray(entry.array("gt/joints2d")), np.asarray(entry.array("render/joints2d")))
    return (float(np.median(body)), float(np.median(ends)), len(body)) if body else None


def fit_errors(entry) -> tuple[float, float, int] | None:
    """The avatars' joints against their own fitted tracks' (body joints; head and wrists)."""
    from anonymask.models.anonymizer.metrics import HEAD_AND_WRISTS, MIN_PERSON_PX
    from anonymask.models.anonymizer.pose.keypoints import BODY_JOINTS
    from anonymask.models.shared.body.model import get_body_model
    from anonymask.models.shared.body.tracks_io import read_tracks

    if not entry.has_array("render/joints2d") or not entry.has_array("pose/camera"):
        return None
    body = get_body_model()
    tracks, camera = read_tracks(entry, "pose")
    drawn = np.asarray(entry.array("render/joints2d"))
    errs, ends = [], []
    for j, tr in enumerate(tracks[: drawn.shape[1]]):
        ok = np.nonzero(tr.valid)[0]
        if len(ok) == 0:
            continue
        fitted = camera.project(body.pose_track(tr.slice(tr.valid)).joints)
        avatar = drawn[ok, j]
        h = fitted[:, BODY_JOINTS, 1].max(1) - fitted[:, BODY_JOINTS, 1].min(1)
        keep = np.isfinite(avatar[:, BODY_JOINTS]).all(axis=(1, 2)) & (h >= MIN_PERSON_PX)
        dist = np.linalg.norm(avatar - fitted, axis=-1)
        errs += list(100 * dist[keep][:, BODY_JOINTS].mean(1) / h[keep])
        ends += list(100 * dist[keep][:, list(HEAD_AND_WRISTS)].mean(1) / h[keep])
    return (float(np.median(errs)), float(np.median(ends)), len(errs)) if errs else None


def main(argv: list[str]) -> int:
    from anonymask.storage.store import DatasetStore

    measure = video_errors
    if argv and argv[0] == "--fit":
        measure, argv = fit_errors, argv[1:]
    if not argv:
        print(__doc__)
        return 2
    rows: dict[str, list] = {}
    for k, url in enumerate(argv):
        for e in DatasetStore.open(url).videos():
            r = measure(e)
            if r is not None:
                rows.setdefault(e.video_id, [None] * len(argv))[k] = r
    for vid, rs in rows.items():
        cells = ["-" if r is None else f"{r[0]:5.2f}% (head and wrists {r[1]:5.2f}%, {r[2]} frames)" for r in rs]
        print(f"{vid:34s} " + "  ->  ".join(cells))
    common = [rs for rs in rows.values() if all(r is not None for r in rs)]
    for k, url in enumerate(argv):
        if common:
            a = np.array([rs[k][:2] for rs in common])
            print(f"{url}: mean over {len(common)} videos: body {a[:, 0].mean():.2f}%, head and wrists {a[:, 1].mean():.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
