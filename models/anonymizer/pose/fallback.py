"""Cover a person who cannot be posed: a neutral standing avatar fitted into their box or face.

Deliver item 2 of issue 8: every person found is replaced, never erased or left. When the pose
model gives no usable body for a person (a head-and-shoulders close-up, a person seen in a single
frame, a person found only by the face detector), pose4d still writes a track for them: the
avatar stands upright facing the camera, arms down, and is placed per frame

- ``anchor="body"``: scaled so that it fills the person's box (the larger of height and width
  ratios, so it covers the box), the top of its head on the top of the box, centred;
- ``anchor="face"``: scaled so that its face matches the detected face's width, its face centred
  on the face box (the body continues below, out of the frame for a close-up).

The person's own pixels are removed by their mask as for any person; the avatar stands where they
stood. Boxes are smoothed over time (moving average over ``2*smooth+1`` frames) so the avatar
does not jitter with the detector.
"""

from __future__ import annotations

import numpy as np

from anonymask.models.shared.body.tracks import NUM_BETAS, NUM_BODY_JOINTS, Camera, SMPLHTrack, upright_orient

#: shoulder rotation (about the body's forward axis) that brings the rest pose's arms down
ARMS_DOWN_DEG = 75.0
#: distance of the face centre below the top of the head, and the face width, in metres (SMPL-H scale)
FACE_BELOW_TOP = 0.11
FACE_WIDTH = 0.15


def neutral_body_pose() -> np.ndarray:
    """(63,) body pose: the rest pose with the arms down along the body."""
    bp = np.zeros(NUM_BODY_JOINTS * 3, np.float32)
    bp[(16 - 1) * 3 + 2] = -np.radians(ARMS_DOWN_DEG)  # left shoulder
    bp[(17 - 1) * 3 + 2] = np.radians(ARMS_DOWN_DEG)  # right shoulder
    return bp


def _geometry(body) -> dict[str, float]:
    """Size and reference heights of the neutral body (canonical frame, y up, metres)."""
    z = np.zeros((1, 3), np.float32)
    out = body.forward(np.zeros(NUM_BETAS, np.float32), z, neutral_body_pose()[None], transl=z)
    v, j = out.vertices[0], out.joints[0]
    top = float(v[:, 1].max())
    return {"height": top - float(v[:, 1].min()), "width": float(np.ptp(v[:, 0])), "top": top,
            "pelvis": float(j[0, 1]), "face": top - FACE_BELOW_TOP}


def smooth_boxes(boxes: np.ndarray, radius: int) -> np.ndarray:
    """Moving average of (T,4) boxes over present frames (NaN rows stay NaN)."""
    boxes = np.asarray(boxes, np.float64)
    ok = np.isfinite(boxes).all(axis=1)
    if radius <= 0 or ok.sum() < 2:
        return boxes.copy()
    filled = np.where(ok[:, None], boxes, 0.0)
    k = np.ones(2 * radius + 1)
    num = np.stack([np.convolve(filled[:, i], k, mode="same") for i in range(4)], axis=1)
    den = np.convolve(ok.astype(np.float64), k, mode="same")[:, None]
    out = np.full_like(boxes, np.nan)
    out[ok] = num[ok] / np.maximum(den[ok], 1.0)
    return out


def box_track(boxes: np.ndarray, camera: Camera, body, track_id: int, anchor: str, smooth: int) -> SMPLHTrack:
    """An upright neutral avatar placed in every frame where ``boxes`` (T,4 x0,y0,x1,y1; NaN:
    absent) is given; see the module docstring for the two anchors."""
    if anchor not in ("body", "face"):
        raise ValueError(f"box_track: anchor must be 'body' or 'face', not {anchor!r}")
    boxes = smooth_boxes(boxes, smooth)
    t_len = boxes.shape[0]
    g = _geometry(body)
    j0 = body.rest_joints()[0]
    track = SMPLHTrack.rest(track_id, t_len)
    track.global_orient[:] = upright_orient(0.0)
    track.body_pose[:] = neutral_body_pose()
    valid = np.isfinite(boxes).all(axis=1) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    for t in np.nonzero(valid)[0]:
        x0, y0, x1, y1 = boxes[t]
        if anchor == "body":
            s = max((y1 - y0) / g["height"], (x1 - x0) / g["width"])  # pixels per metre at the person
            u, v = (x0 + x1) / 2, y0 + (g["top"] - g["pelvis"]) * s
        else:
            s = (x1 - x0) / FACE_WIDTH
            u, v = (x0 + x1) / 2, (y0 + y1) / 2 + (g["face"] - g["pelvis"]) * s
        z = camera.fy / max(s, 1e-6)
        pelvis = np.array([(u - camera.cx) * z / camera.fx, (v - camera.cy) * z / camera.fy, z], np.float32)
        track.transl[t] = pelvis - j0
    track.valid = valid
    return track
