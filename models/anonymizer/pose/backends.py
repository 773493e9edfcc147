"""Backends of the ``pose4d`` stage: where each video's SMPL-H tracks and camera come from.

- ``mediapipe`` (default, offline): every person found on every frame (models/anonymizer/pose/estimate.py,
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
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from anonymask.core.errors import NoPersonError, UnposablePersonError
from anonymask.core.registry import register
from anonymask.models.anonymizer.pose.settings import (
    RENAMED,
    BridgeSettings,
    ConfirmSettings,
    DiscoverSettings,
    EvidenceSettings,
    ExposureSettings,
    FaceSettings,
    FitSettings,
    LinkSettings,
    MediapipePoseSettings,
    ScanSettings,
    VerifySettings,
)


@dataclass
class PoseInputs:
    """What a pose backend may read, and where it writes its per-frame outputs."""

    video_id: str
    source: str  # the file, for messages
    shape: tuple[int, int, int]  # (T, H, W)
    windows: Callable[[], Iterator[tuple[int, np.ndarray]]]  # (t0, frames) in order
    read_frames: Callable[[int, int], np.ndarray]
    #: () -> (write_window(t0, labels, prob), paint_frame(t, detection, track id), relabel_frame(t, old
    #: raw id, new raw id)); creates the per-frame outputs ``pose/instances`` and ``pose/person_prob``
    instance_outputs: Callable[[], tuple[Callable[..., None], Callable[..., None]]] | None = None
    gt_tracks: Callable[[], tuple[list, Any]] | None = None  # ground truth (synthetic data)
    skeleton: str | None = None  # NTU's .skeleton file
    visible_faces: Callable[[], list[int]] = lambda: []
    #: [start, stop) of each shot (models/shared/shots.py); None: one shot
    shots: list[tuple[int, int]] | None = None


@dataclass
class PoseOutput:
    tracks: list
    camera: Any
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # small, whole-video arrays
    written: list[str] = field(default_factory=list)  # per-frame arrays already streamed
    metrics: dict[str, Any] = field(default_factory=dict)


_MAX_GAP = MediapipePoseSettings.model_fields["max_gap"]

#: frames read at a time when a video is estimated shot by shot (memory only, results identical)
SHOT_READ_FRAMES = 64


@register("pose4d", "mediapipe")
class MediapipePose:
    """Every person found on every frame, tracked, fitted and labelled per pixel (offline)."""

    #: the earlier flat settings -> their place in the tree (named in the error)
    RENAMED = RENAMED

    def __init__(
        self,
        detector: str = "mediapipe",
        detector_options: dict[str, Any] | None = None,
        max_gap: Annotated[int, Field(ge=0, description=_MAX_GAP.description)] = _MAX_GAP.default,
        discover: DiscoverSettings = DiscoverSettings(),
        scan: ScanSettings = ScanSettings(),
        evidence: EvidenceSettings = EvidenceSettings(),
        verify: VerifySettings = VerifySettings(),
        link: LinkSettings = LinkSettings(),
        confirm: ConfirmSettings = ConfirmSettings(),
        fit: FitSettings = FitSettings(),
        bridge: BridgeSettings = BridgeSettings(),
        faces: FaceSettings = FaceSettings(),
        exposure: ExposureSettings = ExposureSettings(),
    ):
        """One sub-tree per pass of person discovery (models/anonymizer/pose/settings.py says what each value
        does, its unit and why; docs/RESULTS.md how the values were chosen), e.g.
        ``--set pose4d.discover.limb_conf=0.5 pose4d.faces.enabled=false``. ``detector``: the
        person detector (``mediapipe``, or the weight-backed ``rcnn``) with its options."""
        self.detector, self.detector_options = detector, dict(detector_options or {})
        self.settings = MediapipePoseSettings(max_gap=max_gap, discover=discover, scan=scan, evidence=evidence,
                                              verify=verify, link=link, confirm=confirm, fit=fit, bridge=bridge,
                                              faces=faces, exposure=exposure)

    def estimate(self, io: PoseInputs) -> PoseOutput:
        from anonymask.models.anonymizer.pose.estimate import estimate_people, estimate_people_by_shot
        from anonymask.models.anonymizer.pose.people import get_detector
        from anonymask.models.shared.body.model import get_body_model

        if io.instance_outputs is None:
            raise ValueError(f"{io.video_id}: pose4d backend 'mediapipe' needs somewhere to write instance masks")
        write_window, paint_frame, relabel_frame = io.instance_outputs()
        common = dict(detector=get_detector(self.detector, **self.detector_options), camera=None, source=io.source,
                      write_window=write_window, read_frames=io.read_frames, paint_frame=paint_frame,
                      relabel_frame=relabel_frame)
        if not (io.shots and len(io.shots) > 1):
            common["discovery"] = None  # built from the settings
        try:
            if io.shots and len(io.shots) > 1:  # shot by shot: nobody is carried across a cut
                res = estimate_people_by_shot(io.shots, io.shape, get_body_model().rest_joints(), self.settings,
                                              block=SHOT_READ_FRAMES, **common)
            else:
                res = estimate_people(io.windows(), io.shape, get_body_model().rest_joints(), self.settings, **common)
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


@register("pose4d", "ntu-skeleton")
class NtuSkeletonPose:
    """Fitted to the Kinect v2 skeletons that come with NTU RGB+D videos."""

    def __init__(
        self,
        iterations: Annotated[int, Field(ge=1)] = 100,
        max_bodies: Annotated[int, Field(ge=1)] = 2,
    ):
        self.iterations, self.max_bodies = iterations, max_bodies

    def estimate(self, io: PoseInputs) -> PoseOutput:
        from anonymask.models.anonymizer.pose.fit import FitConfig
        from anonymask.models.anonymizer.pose.ntu import estimate_from_ntu_skeleton
        from anonymask.models.shared.body.model import get_body_model

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
