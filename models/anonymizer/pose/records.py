"""The records person discovery's passes hand each other: one :class:`Person` per person found (no
parallel lists), and :class:`PoseDiagnostics`, what the passes report (typed fields, turned into the
stage's flat metrics once, at the end)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np


class Kind(IntEnum):
    """How a person's avatar was obtained (stored as ``pose/kinds``)."""

    POSED = 0  # SMPL-H fitted to their landmarks
    FALLBACK_BOX = 1  # seen too briefly to pose: a neutral avatar fitted into their box
    FALLBACK_FACE = 2  # a face no body explains: a neutral avatar anchored on the face


@dataclass
class Person:
    """One person: the raw tracks discovery found them as (linked), their boxes and bridged frames
    over the whole video (or shot), and their avatar once fitted."""

    raw_ids: list[int]  # discovery's raw track ids (instance label - 1) that are this person
    frames_seen: list[int]  # frames where a detector or the landmark model saw them
    boxes: np.ndarray  # (T,4) x0,y0,x1,y1, NaN where absent; gaps filled, bridged frames added
    gap: np.ndarray  # (T,) bool: frames bridged between or past their detections
    kind: Kind = Kind.POSED
    track: object | None = None  # SMPLHTrack: full length until bridged, then compact
    reproj: float = float("nan")  # the fit's reprojection term (posed people)
    fit_failed: bool = False  # fitted, but the body reached far past their box: given the box avatar
    #: (kp2d, conf, world) over their span and the span (first, last + 1): the fit's input, dropped
    #: once fitted
    landmarks: tuple | None = None


@dataclass
class PoseDiagnostics:
    """What the passes found and did, per video (or per shot, merged with :meth:`merge`)."""

    linked_tracks: int = 0  # raw tracks joined to an earlier one of the same person
    begun_on_someone: int = 0  # late raw tracks that began on someone followed: linked to nobody before them
    links_refused_scale: int = 0  # detection-track pairs the tracker refused: a body of another scale (discover.py)
    faces_rejected: int = 0  # face tracks the segmentation did not confirm as a person's
    parts_yielded: int = 0  # body-frames not drawn: a part of a face person
    avatars_yielded: int = 0  # body-frames not drawn: the face person's own body
    face_regions: int = 0  # frames where the region around a face a body explains was removed with that body
    detections: dict[str, int] = field(default_factory=dict)  # per source (frame, scan, hold, ...)
    scan_count: int | None = None  # the landmark-model scan's passes, calls and skipped regions
    scan_calls: int | None = None
    scan_skipped: int | None = None
    scan_unchanged: int | None = None  # looks not repeated on pixels that had not changed since
    fits_failed: int = 0  # fits that disagreed with the person's box (models/anonymizer/pose/plausible.py)
    shots: int | None = None
    exposure_gain: float = 1.0  # the largest gain a shot was brightened by for the models (1: none)
    shots_brightened: int = 0  # shots brightened (models/anonymizer/pose/exposure.py)
    verify_rejected: int | None = None  # raw tracks the verification pass dropped (None: pass off)
    verify_rejected_frames: int | None = None  # their frames
    verify_scene: int | None = None  # of those, rejected because their box shows the scene (scene_match.py)
    second_samples: int | None = None  # track samples the second detector looked at (None: pass off)
    second_confirmed: int | None = None  # of those, where it saw the track's person
    second_dropped: int | None = None  # runs of a track it saw no person in for long, dropped (second_detector.py)
    second_dropped_frames: int | None = None  # their frames
    second_parts: int | None = None  # raw tracks it saw as a part of another track's person for a while
    second_part_frames: int | None = None  # frames their avatars yielded there (not drawn, pixels removed)
    people: list[tuple[Kind, int, float]] = field(default_factory=list)  # (kind, frames seen, reproj)

    def merge(self, other: PoseDiagnostics) -> None:
        """Add a later shot's diagnostics (its people numbered on after these)."""
        for name in ("linked_tracks", "begun_on_someone", "links_refused_scale", "faces_rejected", "parts_yielded", "avatars_yielded", "face_regions",
                     "fits_failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for k, v in other.detections.items():
            self.detections[k] = self.detections.get(k, 0) + v
        for name in ("scan_count", "scan_calls", "scan_skipped", "scan_unchanged", "verify_rejected", "verify_rejected_frames",
                     "verify_scene", "second_samples", "second_confirmed", "second_dropped", "second_dropped_frames",
                     "second_parts", "second_part_frames"):
            if getattr(other, name) is not None:
                setattr(self, name, (getattr(self, name) or 0) + getattr(other, name))
        self.exposure_gain = max(self.exposure_gain, other.exposure_gain)
        self.shots_brightened += other.shots_brightened
        self.people.extend(other.people)

    def metrics(self) -> dict[str, float]:
        """The flat metrics the stage records (``status`` and the run report show them)."""
        kinds = [k for k, _, _ in self.people]
        out = {"linked_tracks": float(self.linked_tracks), "begun_on_someone": float(self.begun_on_someone),
               "links_refused_scale": float(self.links_refused_scale),
               "faces_rejected": float(self.faces_rejected),
               "parts_yielded": float(self.parts_yielded), "avatars_yielded": float(self.avatars_yielded),
               "face_regions": float(self.face_regions),
               "fits_failed": float(self.fits_failed),
               "unconfirmed_tracks": float(kinds.count(Kind.FALLBACK_BOX)),
               "fallback_tracks": float(sum(k != Kind.POSED for k in kinds)),
               "face_tracks": float(kinds.count(Kind.FALLBACK_FACE)),
               "exposure_gain": float(self.exposure_gain), "shots_brightened": float(self.shots_brightened)}
        for i, (kind, frames, reproj) in enumerate(self.people):
            out[f"track{i}_frames"] = float(frames)
            if kind == Kind.POSED:
                out[f"track{i}_reproj"] = float(reproj)
        out.update({f"detections_{k}": float(v) for k, v in self.detections.items()})
        for name in ("scan_count", "scan_calls", "scan_skipped", "scan_unchanged", "shots", "verify_rejected", "verify_rejected_frames",
                     "verify_scene", "second_samples", "second_confirmed", "second_dropped", "second_dropped_frames",
                     "second_parts", "second_part_frames"):
            if getattr(self, name) is not None:
                out[name] = float(getattr(self, name))
        return out
