"""Where each fitted body's feet are against the floor the other bodies stand on (measured cue).

Clutter that is small in the image is fitted as a far person (docs/RESULTS.md, "why the 60-s clip
fails its audit"): its body may stand metres from the camera, behind the room's wall. A person's
feet stand on the floor, so a body whose feet are far below the floor that the people stand on is
not a person. This script asks whether that separates, on a finished store (pose4d done): for
every fitted track, every ``--every``-th frame of its own, the lowest of its ankle and foot joints
in camera space; then one floor plane through them all, found by RANSAC (3 foot points at a time,
a normal within 60 degrees of the camera's vertical, 0.15 m inliers; the plane that the most
tracks support wins, then the most points), and each track's height above it. With ``--gt`` (a
generated video's ground truth) each track's share of sampled frames whose box holds a real
person (20% of the box) is printed beside it.

    .venv/bin/python scripts/clutter_cues/floor.py STORE VIDEO [--gt GT.npz] [--every 5]

The camera's intrinsics are the store's (an assumed field of view): a wrong focal length scales
depth, and a plane stays a plane under that scaling, so the test does not need the true one.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import zarr

from anonymask.models.anonymizer.pose.kinematics import forward_kinematics
from anonymask.models.shared.body.model import get_body_model

FEET = [7, 8, 10, 11]  # SMPL-H body joints: left/right ankle, left/right foot


def lowest_feet(track, rest: torch.Tensor, every: int) -> tuple[np.ndarray, np.ndarray]:
    """(frames, (n,3) lowest foot joint in camera space, y down) of a stored track's valid frames."""
    start = int(np.asarray(track["start"][...]).ravel()[0])
    idx = np.nonzero(track["valid"][:])[0][::every]
    if idx.size == 0:
        return idx, np.zeros((0, 3))
    arr = {k: torch.as_tensor(track[k][:][idx], dtype=torch.float32) for k in ("global_orient", "body_pose", "transl")}
    with torch.no_grad():
        joints = forward_kinematics(rest, arr["global_orient"], arr["body_pose"], arr["transl"],
                                    num_joints=22).numpy()[:, :22]
    feet = joints[:, FEET]
    return idx + start, feet[np.arange(len(feet)), feet[:, :, 1].argmax(1)]


def floor_plane(points: np.ndarray, owner: np.ndarray, tries: int = 2000, tol: float = 0.15, seed: int = 0):
    """(unit normal pointing up, a point on it) of the plane most tracks' feet lie on."""
    rng = np.random.default_rng(seed)
    best = None
    for _ in range(tries):
        s = points[rng.choice(len(points), 3, replace=False)]
        n = np.cross(s[1] - s[0], s[2] - s[0])
        if np.linalg.norm(n) < 1e-6:
            continue
        n = n / np.linalg.norm(n)
        if abs(n[1]) < 0.5:
            continue  # not a floor: a normal within 60 degrees of the camera's vertical
        inl = np.abs((points - s[0]) @ n) < tol
        score = (len(set(owner[inl].tolist())), int(inl.sum()))
        if best is None or score > best[0]:
            best = (score, n if n[1] < 0 else -n, s[0])
    return best[1], best[2]


def person_share(boxes: np.ndarray, frames: np.ndarray, masks, cam_hw: tuple[float, float]) -> float:
    """Share of ``frames`` whose box holds a ground-truth person over 20% of its area."""
    sy, sx = masks.shape[2] / cam_hw[0], masks.shape[3] / cam_hw[1]
    hit = 0
    for t in frames:
        b = boxes[t]
        if not np.isfinite(b[0]):
            continue
        x0, y0, x1, y1 = int(b[0] * sx), int(b[1] * sy), int(b[2] * sx) + 1, int(b[3] * sy) + 1
        area = max((x1 - x0) * (y1 - y0), 1)
        hit += (masks[t][:, y0:y1, x0:x1] > 0).sum((1, 2)).max() / area > 0.2
    return hit / max(len(frames), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store")
    ap.add_argument("video")
    ap.add_argument("--gt")
    ap.add_argument("--every", type=int, default=5)
    args = ap.parse_args()
    pose = zarr.open_group(args.store, mode="r")[f"videos/{args.video}/pose"]
    boxes, cam = pose["boxes"][:], pose["camera"][:]
    masks = np.load(args.gt)["person_masks"] if args.gt else None
    rest = torch.as_tensor(get_body_model().rest_joints(), dtype=torch.float32)
    feet, shares = {}, {}
    for k in range(boxes.shape[0]):
        frames, pts = lowest_feet(pose[f"track_{k}"], rest, args.every)
        if len(pts):
            feet[k] = pts
            shares[k] = person_share(boxes[k], frames, masks, (cam[5], cam[4])) if masks is not None else None
    points = np.concatenate(list(feet.values()))
    owner = np.concatenate([[k] * len(v) for k, v in feet.items()])
    normal, p0 = floor_plane(points, owner)
    print(f"{args.video}: floor normal {normal.round(2).tolist()} (camera space, y down)")
    for k, pts in feet.items():
        h = (pts - p0) @ normal
        share = "" if shares[k] is None else f"  person {shares[k]:.2f}"
        print(f"  track {k:2d}  samples {len(pts):4d}  depth {np.median(pts[:, 2]):5.2f} m  feet above floor "
              f"median {np.median(h):5.2f}  p10 {np.percentile(h, 10):5.2f}  p90 {np.percentile(h, 90):5.2f} m{share}")


if __name__ == "__main__":
    main()
