"""Face landmark vertices of a body mesh: nose, eyes, ears (OpenPose) and a face point cloud.

Chosen geometrically on the rest mesh (front of the head, left/right by x), so they work with the
procedural body and with real SMPL-H files alike. The render stage projects them to build the
pose and face ControlNet conditions exactly from the avatar.
"""

from __future__ import annotations

import functools

import numpy as np

from anonymask.models.shared.body.tracks import JOINT_INDEX


@functools.lru_cache(maxsize=4)
def _landmarks(key: int, v: bytes, shape: tuple[int, int], head: bytes) -> tuple[np.ndarray, np.ndarray]:
    verts = np.frombuffer(v, np.float32).reshape(shape)
    head_j = np.frombuffer(head, np.float32)
    rel = verts - head_j
    near = np.linalg.norm(rel, axis=1) < 0.16
    idx = np.where(near)[0]
    r = rel[idx]
    front = r[:, 2]
    nose = idx[np.argmax(front - 3 * np.abs(r[:, 0]))]
    ny = rel[nose, 1]

    def best(score):
        return int(idx[np.argmax(score)])

    eye_y = ny + 0.03
    # person's right is -x in the canonical frame (left joints have +x)
    r_eye = best(front - 4 * np.abs(r[:, 0] + 0.032) - 4 * np.abs(r[:, 1] - eye_y))
    l_eye = best(front - 4 * np.abs(r[:, 0] - 0.032) - 4 * np.abs(r[:, 1] - eye_y))
    r_ear = best(-r[:, 0] - 3 * np.abs(r[:, 1] - ny) - 2 * np.abs(r[:, 2]))
    l_ear = best(r[:, 0] - 3 * np.abs(r[:, 1] - ny) - 2 * np.abs(r[:, 2]))
    face5 = np.array([nose, r_eye, l_eye, r_ear, l_ear], np.int64)
    face_pts = idx[(r[:, 2] > 0.25 * np.abs(r[:, 0]) + 0.02) & (r[:, 1] > ny - 0.06) & (r[:, 1] < ny + 0.07)]
    if len(face_pts) > 64:
        face_pts = face_pts[np.linspace(0, len(face_pts) - 1, 64).astype(int)]
    return face5, face_pts.astype(np.int64)


def face_landmarks(body_model) -> tuple[np.ndarray, np.ndarray]:
    """(face5 vertex ids: nose, r_eye, l_eye, r_ear, l_ear), (up to 64 face-surface vertex ids)."""
    rest = body_model.rest()
    verts = np.ascontiguousarray(rest.vertices[0], np.float32)
    head = np.ascontiguousarray(rest.joints[0, JOINT_INDEX["head"]], np.float32)
    return _landmarks(id(body_model), verts.tobytes(), verts.shape, head.tobytes())
