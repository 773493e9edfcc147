"""Backends of the ``pose4d`` stage: where each video's SMPL-H tracks and camera come from.

- ``mediapipe`` (default, offline): every person found on every frame (models/pose/estimate.py,
  discover.py; the person detector is ``detector``: ``mediapipe`` or the weight-backed ``rcnn``),
  with per-pixel instance labels and person probability for the later stages;
- ``ntu-skeleton``: fitted to the Kinect skeletons NTU RGB+D ships with its videos;
- ``gt``: the ground-truth tracks of synthetic data.

A backend reads and writes only through :class:`PoseInputs`, which the stage builds over the store,
so no backend does store I/O itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anonymask.errors import NoPersonError, UnposablePersonError
from anonymask.models.registry import register


@dataclass
class PoseInputs:
    """What a pose backend may read, and where it writes its per-frame outputs."""

    video_id: str
    source: str  # the file, for messages
    shape: tuple[int, int, int]  # (T, H, W)
    windows: Callable[[], Iterator[tuple[int, np.ndarray]]]  # (t0, frames) in order
    read_frames: Callable[[int, int], np.ndarray]
    #: () -> (write_window(t0, labels, prob), paint_frame(t, detection, track id)); creates the
    #: per-frame outputs ``pose/instances`` and ``pose/person_prob``
    instance_outputs: Callable[[], tuple[Callable[..., None], Callable[..., None]]] | None = None
    gt_tracks: Callable[[], tuple[list, Any]] | None = None  # ground truth (synthetic data)
    skeleton: str | None = None  # NTU's .skeleton file
    visible_faces: Callable[[], list[int]] = lambda: []
    #: [start, stop) of each shot (models/shots.py); None: one shot
    shots: list[tuple[int, int]] | None = None


@dataclass
class PoseOutput:
    tracks: list
    camera: Any
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # small, whole-video arrays
    written: list[str] = field(default_factory=list)  # per-frame arrays already streamed
    metrics: dict[str, Any] = field(default_factory=dict)


@register("pose4d", "mediapipe", limits={
    "min_visible_frames": {"ge": 1}, "max_gap": {"ge": 0}, "link_gap": {"ge": 0}, "keyframe_every": {"ge": 1}, "detect_every": {"ge": 1},
    "scan_every": {"ge": 1}, "scan_rotate": {"ge": 1}, "hold_motion": {"ge": 0}, "follow_motion": {"ge": 0}, "limb_conf": {"ge": 0, "le": 1}, "iterations": {"ge": 1},
    "w_3d": {"ge": 0}})
class MediapipePose:
    """Every person found on every frame, tracked, fitted and labelled per pixel (offline)."""

    def __init__(self, detector: str = "mediapipe", detector_options: dict[str, Any] | None = None,
                 min_visible_frames: int = 2, max_gap: int = 10, link_gap: int = 48, keyframe_every: int = 10,
                 tiles: bool = False,
                 detect_every: int = 4, scan: bool = True, scan_every: int | None = 16, backfill: bool = True,
                 faces: bool = True, iterations: int = 150, anchor: bool = True, face_heads: bool = True,
                 w_3d: float = 0.25, scan_rotate: int = 2,
                 hold_motion: float = 30.0, follow_motion: float = 25.0, limb_conf: float = 0.1,
                 parts_yield: bool = True, verify: bool = True, verify_options: dict[str, Any] | None = None):
        """``anchor``: the scan also accepts a person on a region the landmark model is sure of
        (flag >= 0.75) when the regions it predicts from there drift off them (a thin person in
        front of a big object), provided the landmarks agree with the first look and stay put when
        the region moves a little (models/pose/scan.py ``PoseScanner._anchored``); False: the
        scan of before (the man standing still in s04s03_a04_r01 is never found). ``face_heads``:
        a face is explained by a body only where that body's avatar has its head on the face
        (models/pose/faces.py ``head_covers``); False: wherever the body's box holds the face.
        ``w_3d``: weight of the landmark model's root-relative 3-D landmarks against the 2-D
        reprojection in the body fit (``FitConfig.w_3d``). 0.25 since 2026-11-25 (4.0 before):
        followed closely, their depth guesses turn limbs towards or away from the camera, the
        avatar drawn is smaller than the person and off their pose. Swept over 4, 1, 0.5, 0.25,
        0.1 and 0 on the demo, hard and real sets (docs/RESULTS.md): 0.25 gave the lowest
        synthetic MPJPE (median 124 -> 106 mm) and real removed area / avatar area median
        2.30 -> 1.82 (max 3.25 -> 2.53); 0 (2-D only) is worse again in 3-D.
        ``scan_rotate``: after its first pass, the landmark-model scan looks at the regions whose
        pixels changed since its last pass and at a rotating ``1/scan_rotate`` share of the
        others (models/pose/scan.py); 1: the whole grid on every pass (before 2026-11-25).
        ``hold_motion``: a person held in place (lost by the landmark model, still there) keeps
        their last mask plus the pixels next to it that changed by more than this many grey
        levels since they were last seen (an arm stretched out meanwhile); 0: the last mask only
        (before 2026-11-25).
        ``follow_motion``: a person lost while walking is followed by what keeps moving next to
        them, frame by frame (grey levels between frames aligned by homography; models/pose/
        follow.py): their legs, seen without a body, walked on past the walk-on's box and were
        shown (bikes.mp4 at 640 px); 0: the walk-on's box only (before 2026-11-25 evening).
        ``limb_conf``: the landmark visibility a limb needs to be drawn into its person's mask,
        beyond the segmentation if need be (models/pose/discover.py ``add_limbs``): 0.1 since
        2026-11-25 night (0.5 before): a leg behind a motorcycle, placed by the landmark model but
        seen at 0.2-0.5, was left out of the mask and shown.
        ``parts_yield``: a small body the landmark model drew on a close-up's face person (on their
        chest or hair) is not drawn there; its pixels stay removed (models/pose/estimate.py
        ``yield_parts_to_face``); False: drawn, as before 2026-11-26.
        ``verify``: a raw track is dropped (no avatar, its pixels not removed) when its life shows
        no evidence of a person (models/pose/verify.py; thresholds: ``verify_options``, the fields
        of ``VerifySettings``); False: every track is kept, as before 2026-11-26.
        """
        self.detector, self.detector_options = detector, dict(detector_options or {})
        self.options = dict(min_visible_frames=min_visible_frames, max_gap=max_gap, link_gap=link_gap,
                            keyframe_every=keyframe_every,
                            tiles=tiles, detect_every=detect_every, scan=scan, scan_every=scan_every,
                            backfill=backfill, faces=faces, anchor=anchor, face_heads=face_heads,
                            scan_rotate=int(scan_rotate), hold_motion=float(hold_motion),
                            follow_motion=float(follow_motion), limb_conf=float(limb_conf),
                            parts_yield=bool(parts_yield))
        self.iterations = iterations
        self.w_3d = float(w_3d)
        from anonymask.models.pose.verify import VerifySettings

        self.verify = VerifySettings(enabled=bool(verify), **dict(verify_options or {}))

    def estimate(self, io: PoseInputs) -> PoseOutput:
        from anonymask.models.body.model import get_body_model
        from anonymask.models.pose.estimate import estimate_people, estimate_people_by_shot
        from anonymask.models.pose.fit import FitConfig
        from anonymask.models.pose.people import get_detector

        if io.instance_outputs is None:
            raise ValueError(f"{io.video_id}: pose4d backend 'mediapipe' needs somewhere to write instance masks")
        write_window, paint_frame = io.instance_outputs()
        opts = dict(self.options, min_visible_frames=min(self.options["min_visible_frames"], io.shape[0]))
        common = dict(paint_frame=paint_frame, detector=get_detector(self.detector, **self.detector_options),
                      fit=FitConfig(iterations=self.iterations, w_3d=self.w_3d), source=io.source,
                      verify=self.verify, **opts)
        try:
            if io.shots and len(io.shots) > 1:  # shot by shot: nobody is carried across a cut
                res = estimate_people_by_shot(io.shots, io.shape, get_body_model().rest_joints(), write_window,
                                              io.read_frames, **common)
            else:
                res = estimate_people(io.windows(), io.shape, get_body_model().rest_joints(), write_window,
                                      read_frames=io.read_frames, **common)
        except NoPersonError as err:
            faces = io.visible_faces()
            if faces:
                raise UnposablePersonError(
                    f"{io.video_id}: a person is visible (a face in frames {faces}) but the pose model found no "
                    f"body to replace them with; the video is not published ({err})") from None
            raise
        return PoseOutput(res.tracks, res.camera, written=["pose/instances", "pose/person_prob"],
                          arrays={"pose/instance_track": res.instance_track, "pose/boxes": res.boxes,
                                  "pose/gap": res.gap, "pose/kinds": res.kinds},
                          metrics=dict(res.diagnostics))


@register("pose4d", "ntu-skeleton", limits={"iterations": {"ge": 1}, "max_bodies": {"ge": 1}})
class NtuSkeletonPose:
    """Fitted to the Kinect v2 skeletons that come with NTU RGB+D videos."""

    def __init__(self, iterations: int = 100, max_bodies: int = 2):
        self.iterations, self.max_bodies = iterations, max_bodies

    def estimate(self, io: PoseInputs) -> PoseOutput:
        from anonymask.models.body.model import get_body_model
        from anonymask.models.pose.fit import FitConfig
        from anonymask.models.pose.ntu import estimate_from_ntu_skeleton

        res = estimate_from_ntu_skeleton(io.skeleton, (*io.shape, 3), get_body_model(), max_bodies=self.max_bodies,
                                         fit=FitConfig(iterations=self.iterations), video=io.video_id)
        return PoseOutput(res.tracks, res.camera, metrics=dict(res.diagnostics))


@register("pose4d", "gt")
class GroundTruthPose:
    """The ground-truth tracks of synthetic data (ablations, tests)."""

    def estimate(self, io: PoseInputs) -> PoseOutput:
        if io.gt_tracks is None:
            raise ValueError(f"{io.video_id}: pose4d backend 'gt' needs ground truth (synthetic data only)")
        tracks, camera = io.gt_tracks()
        return PoseOutput(tracks, camera)
