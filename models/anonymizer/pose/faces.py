"""People seen only by their face: close-ups (head and shoulders filling the frame) and faces whose
body the pose models did not find.

The pose landmark model needs a body; in a close-up there is none to speak of. MediaPipe's face
detectors (BlazeFace short and full range, shipped in the wheel) find the face; MediaPipe's selfie
segmentation (also shipped; made for exactly this framing) gives the person's pixels. A face
that no discovered body explains (no track's avatar has its head there, :func:`head_covers`) and
that is seen in ``min_frames`` frames, and where the segmentation agrees there is a person
(:meth:`FaceBodyMask.confirms`), becomes a *face person*: pose4d covers them with a neutral
avatar anchored on the face (models/anonymizer/pose/fallback.py) and removes the connected selfie-mask
region around the face.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from anonymask.models.anonymizer.pose.settings import FaceSettings
from anonymask.models.shared.body.tracks import JOINT_INDEX
from anonymask.models.shared.geometry import box_iou


class FaceFinder:
    """BlazeFace short-range + full-range on the frame (and a 2x upscale of small frames),
    duplicates merged. ``detect(frame) -> [(box x0,y0,x1,y1, score)]`` in frame pixels."""

    def __init__(self, min_score: float, upscale_below: int, duplicate_iou: float):
        import mediapipe as mp

        self.models = [mp.solutions.face_detection.FaceDetection(model_selection=s, min_detection_confidence=min_score)
                       for s in (0, 1)]
        self.min_score = float(min_score)
        self.upscale_below = int(upscale_below)
        self.duplicate_iou = float(duplicate_iou)

    def detect(self, frame: np.ndarray) -> list[tuple[np.ndarray, float]]:
        h, w = frame.shape[:2]
        img = frame
        if max(h, w) < self.upscale_below:
            img = cv2.resize(frame, (2 * w, 2 * h), interpolation=cv2.INTER_LINEAR)
        out: list[tuple[np.ndarray, float]] = []
        for m in self.models:
            for d in m.process(np.ascontiguousarray(img)).detections or []:
                sc = float(d.score[0])
                if sc < self.min_score:
                    continue
                b = d.location_data.relative_bounding_box
                box = np.array([b.xmin * w, b.ymin * h, (b.xmin + b.width) * w, (b.ymin + b.height) * h], np.float32)
                if not any(box_iou(box, o) > self.duplicate_iou for o, _ in out):
                    out.append((box, sc))
        return out


@dataclass
class FaceTrack:
    boxes: dict[int, np.ndarray] = field(default_factory=dict)
    last_t: int = -1

    def box_array(self, t_len: int) -> np.ndarray:
        out = np.full((t_len, 4), np.nan, np.float32)
        for t, b in self.boxes.items():
            out[t] = b
        return out


#: the avatar's face centre along its neck -> head joint direction, in units of that bone (the
#: project's neutral body: face centre 0.11 m below the top of the head, models/anonymizer/pose/fallback.py),
#: and the half side of a box around it that holds the face (m)
FACE_ALONG_NECK = 1.67
HEAD_HALF = 0.1
#: SMPL-H joints: forward kinematics runs up to the head (its chain needs only the joints before it)
NECK, HEAD = JOINT_INDEX["neck"], JOINT_INDEX["head"]


def avatar_heads(tracks, rest_joints: np.ndarray, camera, t_len: int) -> np.ndarray:
    """(N, T, 4) square boxes (x0,y0,x1,y1 px) around each track's avatar face per frame (NaN
    where the track is absent or its head is behind the camera), from its SMPL-H parameters by
    forward kinematics of the body joints only (no mesh; one track's own rows at a time)."""
    import torch

    from anonymask.models.anonymizer.pose.kinematics import forward_kinematics

    rest = torch.as_tensor(np.asarray(rest_joints, np.float32))
    out = np.full((len(tracks), t_len, 4), np.nan, np.float32)
    for j, tr in enumerate(tracks):
        rows = np.flatnonzero(np.asarray(tr.valid, bool))
        rows = rows[(tr.start + rows >= 0) & (tr.start + rows < t_len)]
        if not rows.size:
            continue
        with torch.no_grad():
            joints = forward_kinematics(rest, torch.as_tensor(tr.global_orient[rows]),
                                        torch.as_tensor(tr.body_pose[rows]), torch.as_tensor(tr.transl[rows]),
                                        num_joints=HEAD + 1).numpy().astype(np.float64)
        neck, head = joints[:, NECK], joints[:, HEAD]
        face = head + FACE_ALONG_NECK * (head - neck)
        z = face[:, 2]
        ok = z > 1e-3
        uv = camera.project(face[ok])
        half = camera.fx * HEAD_HALF / z[ok]
        out[j, tr.start + rows[ok]] = np.stack([uv[:, 0] - half, uv[:, 1] - half, uv[:, 0] + half,
                                                uv[:, 1] + half], -1)
    return out


def head_covers(face: np.ndarray, heads: list[np.ndarray], boxes: list[np.ndarray] | None, min_cover: float,
                min_width: float) -> bool:
    """Some track's avatar stands for this face (:func:`covering_track` finds which)."""
    return covering_track(face, heads, boxes, min_cover, min_width) >= 0


def covering_track(face: np.ndarray, heads: list[np.ndarray], boxes: list[np.ndarray] | None, min_cover: float,
                   min_width: float) -> int:
    """The index of the first track whose avatar stands for this face, or -1: its head (boxes of
    :func:`avatar_heads` in this frame) is at least ``min_width`` of the face's width, and it covers
    at least ``min_cover`` of the face box or (``boxes``: the tracks' person boxes, same order) the
    track's box holds the face's centre (a person-sized avatar whose fit put the head a little off
    the face: the face is removed with its person and the avatar stands for them). A box around the
    face with a small avatar in it is not enough: a spurious body fitted small into a close-up's box
    "explained" the face, which was then left to the background fill instead of an avatar
    (docs/RESULTS.md)."""
    fw, fh = float(face[2] - face[0]), float(face[3] - face[1])
    if fw <= 0 or fh <= 0:
        return -1
    for k, b in enumerate(heads):
        if not np.all(np.isfinite(b)) or (b[2] - b[0]) < min_width * fw:
            continue
        iw = min(face[2], b[2]) - max(face[0], b[0])
        ih = min(face[3], b[3]) - max(face[1], b[1])
        if iw > 0 and ih > 0 and iw * ih >= min_cover * fw * fh:
            return k
        if boxes is not None and explained(face, [boxes[k]], grow=0.0):
            return k
    return -1


def explained(box: np.ndarray, person_boxes: list[np.ndarray], grow: float) -> bool:
    """The face's centre lies inside some person's box (grown by ``grow`` of its size)."""
    return holding_box(box, person_boxes, grow) >= 0


def holding_box(box: np.ndarray, person_boxes: list[np.ndarray], grow: float) -> int:
    """The index of the first person box (grown by ``grow`` of its size) that holds the face's
    centre, or -1."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    for k, b in enumerate(person_boxes):
        if not np.all(np.isfinite(b)):
            continue
        gx, gy = grow * (b[2] - b[0]), grow * (b[3] - b[1])
        if b[0] - gx <= cx <= b[2] + gx and b[1] - gy <= cy <= b[3] + gy:
            return k
    return -1


def unexplained_faces(read, t_len: int, person_boxes: np.ndarray, *, finder: FaceFinder, settings: FaceSettings,
                      heads: np.ndarray | None, explained_by: dict[int, FaceTrack] | None) -> list[FaceTrack]:
    """Face tracks (boxes on every ``settings.every``-th frame, gaps bridged by the caller) of faces
    that no person explains, seen at least ``settings.min_detections`` times; a track continues
    over up to ``settings.track_gap`` missed detections. ``heads`` (N,T,4, :func:`avatar_heads`, the tracks of ``person_boxes``):
    explained only where a person-sized avatar head is on the face or in a box around it
    (:func:`covering_track`); without it, where a person's box (``person_boxes`` (N,T,4), NaN where
    absent) holds the face's centre. ``read(a, b)`` gives frames. ``explained_by`` (None: not
    collected) receives, per person index, the faces that person explains (the largest per frame)."""
    every, window, max_gap = settings.every, settings.read_frames, settings.track_gap
    tracks: list[FaceTrack] = []
    for a in range(0, t_len, window):
        frames = read(a, min(t_len, a + window))
        for k in range(len(frames)):
            t = a + k
            if t % every and t != t_len - 1:
                continue
            pb = [person_boxes[j, t] for j in range(person_boxes.shape[0])]
            hb = None if heads is None else [heads[j, t] for j in range(heads.shape[0])]
            for box, _ in finder.detect(frames[k]):
                j = (covering_track(box, hb, pb, settings.head_cover, settings.head_min_width) if hb is not None
                     else holding_box(box, pb, settings.box_grow))
                if j >= 0:
                    if explained_by is not None:
                        ft = explained_by.setdefault(j, FaceTrack())
                        old = ft.boxes.get(t)
                        if old is None or _area(box) > _area(old):
                            ft.boxes[t] = box
                            ft.last_t = t
                    continue
                live = [tr for tr in tracks if t - tr.last_t <= max_gap * every]
                best = max(live, key=lambda tr: box_iou(tr.boxes[tr.last_t], box), default=None)
                if best is None or box_iou(best.boxes[best.last_t], box) < settings.track_iou:
                    best = FaceTrack()
                    tracks.append(best)
                best.boxes[t] = box
                best.last_t = t
    return [tr for tr in tracks if len(tr.boxes) >= settings.min_detections]


def _area(box: np.ndarray) -> float:
    return float(max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1]))


class FaceBodyMask:
    """The person around a face: selfie segmentation (general model) on the frame, the connected
    regions that touch the face box (grown by half its size); the face box itself is always in."""

    def __init__(self, threshold: float):
        import mediapipe as mp

        self.seg = mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=0)
        self.threshold = float(threshold)

    def _prob(self, frame: np.ndarray) -> np.ndarray:
        h, w = frame.shape[:2]
        return np.asarray(self.seg.process(np.ascontiguousarray(frame)).segmentation_mask, np.float32).reshape(h, w)

    def confirms(self, read, track: FaceTrack, samples: int, min_prob: float) -> bool:
        """A second model agrees that the face is a person's: the segmentation's probability inside
        the face box (median over up to ``samples`` of the track's frames) is >= ``min_prob``
        (BlazeFace alone fires now and then on a headlight or a pattern)."""
        ts = sorted(track.boxes)
        ts = [ts[int(i)] for i in np.unique(np.linspace(0, len(ts) - 1, min(samples, len(ts))).round())]
        vals = []
        for t in ts:
            box = track.boxes[t]
            prob = self._prob(read(t, t + 1)[0])
            x0, y0 = int(max(0, np.floor(box[0]))), int(max(0, np.floor(box[1])))
            x1, y1 = int(min(prob.shape[1], np.ceil(box[2]))), int(min(prob.shape[0], np.ceil(box[3])))
            vals.append(float(prob[y0:y1, x0:x1].mean()) if x1 > x0 and y1 > y0 else 0.0)
        return bool(vals) and float(np.median(vals)) >= min_prob

    def __call__(self, frame: np.ndarray, face: np.ndarray) -> np.ndarray:
        h, w = frame.shape[:2]
        prob = self._prob(frame)
        on = (prob >= self.threshold).astype(np.uint8)
        fw, fh = face[2] - face[0], face[3] - face[1]
        x0, y0 = int(max(0, np.floor(face[0] - fw / 2))), int(max(0, np.floor(face[1] - fh / 2)))
        x1, y1 = int(min(w, np.ceil(face[2] + fw / 2))), int(min(h, np.ceil(face[3] + fh / 2)))
        n, lab = cv2.connectedComponents(on, connectivity=8)
        keep = np.zeros(n, bool)
        if n > 1:
            keep[np.unique(lab[y0:y1, x0:x1])] = True
            keep[0] = False
        out = np.where(keep[lab], prob, 0.0).astype(np.float32)
        fx0, fy0 = int(max(0, np.floor(face[0]))), int(max(0, np.floor(face[1])))
        fx1, fy1 = int(min(w, np.ceil(face[2]))), int(min(h, np.ceil(face[3])))
        out[fy0:fy1, fx0:fx1] = np.maximum(out[fy0:fy1, fx0:fx1], 1.0)
        return out
