"""Person-segmentation backends behind one small protocol and a registry.

``get_segmenter(name, **cfg).segment(frames, rois=None) -> (T,H,W) float32`` person probability.

- ``mediapipe``: the selfie-segmentation model (``model="selfie"``, ``model_selection`` 0 or 1) or
  the pose model's segmentation mask (``model="pose"``, model_complexity=1, the only one shipped in
  the wheel), both bundled with mediapipe and run offline. These models are trained on people that
  fill the frame; small people in wide shots are often missed. Pass ``rois`` (square boxes around
  each person, e.g. from the fitted body tracks) to run the model on each person crop and paste the
  probabilities back (max over overlapping crops): that finds people the full frame misses.
- ``gt``: ground-truth masks supplied by the caller (datasets with masks, tests, ablations).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import cv2
import numpy as np

from anonymask.core.registry import build, names, register
from anonymask.models.anonymizer.segment.masks import as_alpha


class Segmenter(Protocol):
    def segment(self, frames: np.ndarray, rois: np.ndarray | None = None) -> np.ndarray: ...

    def window_probability(self, inputs: SegmentInputs, start: int, stop: int) -> np.ndarray: ...


@dataclass
class SegmentInputs:
    """What a segmenter may read for frames [start, stop): the frames, and arrays other stages
    stored (``stored(name, start, stop)``, None when the store has no such array)."""

    frames: Callable[[int, int], np.ndarray]
    stored: Callable[[str, int, int], np.ndarray | None]





def available_segmenters() -> list[str]:
    return names("segment")


def get_segmenter(name: str, **cfg) -> Segmenter:
    """The segmenter registered as ``name`` (core/registry.py), settings validated."""
    return build("segment", name, **cfg)


def _check_video(frames: np.ndarray) -> np.ndarray:
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be (T,H,W,3) uint8 RGB, got {frames.shape} {frames.dtype}")
    return frames


@register("segment", "gt", runtime=("masks",))
class GroundTruthSegmenter:
    """Passes through masks the caller already has (bool, uint8 or alpha) as probabilities."""

    def __init__(self, masks: np.ndarray | None = None):
        self.masks = masks

    def window_probability(self, inputs: SegmentInputs, start: int, stop: int) -> np.ndarray:
        """The store's ground-truth person masks (synthetic data)."""
        m = inputs.stored("gt/person_mask", start, stop)
        if m is None:
            raise ValueError("segment backend 'gt' needs ground-truth person masks (synthetic data only)")
        return as_alpha(m)

    def segment(self, frames: np.ndarray, rois: np.ndarray | None = None, masks: np.ndarray | None = None):
        frames = _check_video(frames)
        m = masks if masks is not None else self.masks
        if m is None:
            raise ValueError("gt segmenter: no ground-truth masks were given")
        prob = as_alpha(m)
        if prob.shape != frames.shape[:3]:
            raise ValueError(f"gt segmenter: masks {prob.shape} do not match frames {frames.shape[:3]}")
        return prob


def _roi_affine(box: np.ndarray, size: int) -> np.ndarray:
    """Affine map from crop pixel centres to frame pixel centres for a square box (x0,y0,x1,y1)."""
    x0, y0, x1, y1 = (float(v) for v in box)
    side = max(x1 - x0, y1 - y0)
    k = side / size
    return np.array([[k, 0.0, x0 + 0.5 * k - 0.5], [0.0, k, y0 + 0.5 * k - 0.5]], np.float64)


@register("segment", "mediapipe")
class MediapipeSegmenter:
    """mediapipe's bundled selfie segmentation or pose segmentation (offline, CPU)."""

    def __init__(self, model: Literal["selfie", "pose"] = "selfie", model_selection: Literal[0, 1] = 1,
                 roi_size: int = 256):
        if model not in ("selfie", "pose"):
            raise ValueError(f"mediapipe segmenter: model must be 'selfie' or 'pose', got {model!r}")
        if model_selection not in (0, 1):
            raise ValueError(f"mediapipe segmenter: model_selection must be 0 or 1, got {model_selection}")
        self.model = model
        self.model_selection = model_selection
        self.roi_size = int(roi_size)

    def window_probability(self, inputs: SegmentInputs, start: int, stop: int) -> np.ndarray:
        """The person probability pose4d stored with its instance masks when there is one (the
        landmark model's own segmentation of each found person), else this model on the frames."""
        p = inputs.stored("pose/person_prob", start, stop)
        if p is not None:
            return p.astype(np.float32) / 255.0
        return np.asarray(self.segment(inputs.frames(start, stop)), np.float32)

    def _open(self, video_mode: bool):
        import mediapipe as mp

        if self.model == "selfie":
            return mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=self.model_selection)
        # complexity 1 is the only pose landmark model shipped inside the wheel (0 and 2 download).
        return mp.solutions.pose.Pose(
            static_image_mode=not video_mode, model_complexity=1, enable_segmentation=True
        )

    @staticmethod
    def _run(graph, image: np.ndarray) -> np.ndarray | None:
        res = graph.process(np.ascontiguousarray(image))
        return res.segmentation_mask

    def segment(self, frames: np.ndarray, rois: np.ndarray | None = None) -> np.ndarray:
        """frames (T,H,W,3) uint8 RGB; rois optional (N,T,4) or (T,4) square boxes in pixels."""
        frames = _check_video(frames)
        t_len, h, w = frames.shape[:3]
        prob = np.zeros((t_len, h, w), np.float32)
        if rois is None:
            with self._open(video_mode=True) as graph:
                for t in range(t_len):
                    m = self._run(graph, frames[t])
                    if m is not None:
                        prob[t] = m
            return prob
        rois = np.asarray(rois, np.float64)
        if rois.ndim == 2:
            rois = rois[None]
        if rois.shape[1:] != (t_len, 4):
            raise ValueError(f"rois must be (N,T,4) with T={t_len}, got {rois.shape}")
        s = self.roi_size
        for track in rois:
            # one graph per track: the video-mode trackers inside mediapipe follow one person.
            with self._open(video_mode=True) as graph:
                for t in range(t_len):
                    box = track[t]
                    if not np.all(np.isfinite(box)) or box[2] <= box[0] or box[3] <= box[1]:
                        continue
                    a = _roi_affine(box, s)
                    crop = cv2.warpAffine(
                        frames[t], a, (s, s), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                        borderMode=cv2.BORDER_CONSTANT, borderValue=0,
                    )
                    m = self._run(graph, crop)
                    if m is None:
                        continue
                    back = cv2.warpAffine(
                        np.asarray(m, np.float32), a, (w, h), flags=cv2.INTER_LINEAR,
                        borderMode=cv2.BORDER_CONSTANT, borderValue=0,
                    )
                    np.maximum(prob[t], back, out=prob[t])
        return prob
