"""Every anonymization stage, declared once, and its typed settings, validated before any work starts.

A stage is one :func:`declare_stage` call beside its settings model: the stages it reads
(``deps``), where its run function lives, how its record names its backend, the sub-backends its
settings select (pose4d's person detector, the audit's detector list), and the layout and privacy
versions that join its hash. Everything else is derived from these declarations: the execution
order (:func:`stage_order`, a stable topological order of ``deps`` in declaration order),
validation, the stage hash and the weight checks here; the runnable stages in tasks/common.py.
config/ may not import tasks/ (tests/test_layers.py), so a declaration names its run function
(and ingest its source hooks) by import path, ``"anonymask.tasks.segment:run"``, which
tasks/common.py imports when a stage first runs; a callable works too (a test's toy stage).
Adding a stage: its settings model, a ``declare_stage`` call below it, and tasks/<stage>.py with
``run(entry, settings, writer)`` (its typed settings, :func:`stage_settings`).

A stage's section of the pipeline config (``segment: {threshold: 0.5, ...}``) is validated by the
stage's model below plus, for stages with backends, the chosen backend's settings model from the
registry (core/registry.py). The result is one flat dict with every setting present (defaults
included, values in canonical types); the stage hash is computed from it, minus the settings
marked ``hashed=False`` (window sizes: they change memory, never results), so equivalent settings
hash the same and a window size recomputes nothing. Defaults are stated here and in the backends'
signatures, nowhere else. A task receives that dict typed (:func:`stage_settings`: the stage's
model joined with its backend's, frozen, read as attributes; :class:`PipelineSettings`: one per
stage), whose ``to_dict()`` is the dict itself, so the hash does not change.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, create_model, field_validator

from anonymask.core.errors import SettingsError
from anonymask.core.registry import backends, did_you_mean, get_backend, validate_model
from anonymask.storage.windows import WINDOW_FRAMES


def _window(default: int = WINDOW_FRAMES):
    """Frames processed at a time: memory only (results are identical for any window)."""
    return Field(default, ge=1, json_schema_extra={"hashed": False})


class StageSettings(BaseModel):
    """A stage's own settings; :func:`stage_settings` gives the typed object a task receives (this
    model joined with its selected backend's settings)."""

    # arbitrary types: a stage's typed settings carry its backend's fields (core/registry.py)
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    #: the dict :func:`validate_stage` gave (set by :func:`typed_settings`)
    _validated: dict[str, Any] | None = PrivateAttr(default=None)

    def to_dict(self) -> dict[str, Any]:
        """The validated settings as a plain dict, exactly as :func:`validate_stage` gave them (what
        the stage hash and its record are made of)."""
        return copy.deepcopy(self._validated) if self._validated is not None else self.model_dump()


def _own(be, values: dict[str, Any]) -> dict[str, Any]:
    """The settings of backend ``be`` among ``values``."""
    return {k: values[k] for k in be.settings.model_fields if k in values}


@dataclass(frozen=True)
class NamedBackend:
    """A setting that names one backend of another kind, its options beside it (pose4d.detector,
    pose4d.detector_options); only where the stage's selected backend has that setting."""

    name_key: str
    options_key: str
    kind: str

    def validate(self, stage: str, out: dict[str, Any]) -> None:
        """In place: the options, complete, for the backend named (a stage's validated settings)."""
        if self.name_key in out:
            be = get_backend(self.kind, out[self.name_key])
            out[self.options_key] = be.validate(out.get(self.options_key) or {}).model_dump()

    def check_weights(self, section: dict[str, Any]) -> None:
        if self.name_key in section:
            be = get_backend(self.kind, section[self.name_key])
            be.check_weights(_own(be, section.get(self.options_key) or {}))


@dataclass(frozen=True)
class BackendList:
    """A setting that lists backends of another kind, each with its options under
    ``options_key.<name>`` (audit.detectors, audit.detector_options)."""

    names_key: str
    options_key: str
    kind: str

    def validate(self, stage: str, out: dict[str, Any]) -> None:
        """In place: each listed backend's options, complete; options of an unlisted one raise."""
        names, opts = out[self.names_key], out.get(self.options_key) or {}
        for name in names:
            get_backend(self.kind, name)
        for name in opts:
            if name not in names:
                raise SettingsError(f"{stage}.{self.options_key}.{name}: {name!r} is not in {stage}.{self.names_key}")
        out[self.options_key] = {n: get_backend(self.kind, n).validate(opts.get(n) or {}).model_dump() for n in names}

    def check_weights(self, section: dict[str, Any]) -> None:
        for name in section.get(self.names_key, []):
            be = get_backend(self.kind, name)
            be.check_weights(_own(be, (section.get(self.options_key) or {}).get(name) or {}))


@dataclass(frozen=True)
class StageDeclaration:
    """One stage of the per-video DAG: everything about it that is not its computation."""

    name: str
    settings: type[StageSettings]
    #: ``run(entry, settings, writer)`` (typed settings): "module:function" (imported by tasks/common.py) or the function
    run: str | Callable[..., None]
    #: the stages whose outputs it reads (their output hashes make its input hash)
    deps: tuple[str, ...] = ()
    #: the backend its record names: a fixed name, a function of the validated settings, or
    #: (None) the settings' ``backend``
    backend: str | Callable[[dict[str, Any]], str] | None = None
    #: settings that select backends of other kinds, validated and weight-checked with the stage
    sub_backends: tuple[NamedBackend | BackendList, ...] = ()
    #: joins the hash where the stored layout changed: a store of older code is recomputed, not misread
    layout_version: int | None = None
    #: joins the hash where a fix changed what is removed: a store of older code is recomputed
    #: from this stage on instead of keeping a person the older code left visible
    privacy_version: int | None = None
    #: ``external(entry) -> str``: inputs outside the store (the source's identity) for the input hash
    external: str | Callable[..., str] | None = None
    #: ``prepare(entry)``: called under the claim before the input hash (ingest: legacy records)
    prepare: str | Callable[..., None] | None = None

    def record_backend(self, settings: dict[str, Any]) -> str:
        """The backend name the stage's record states."""
        if self.backend is None:
            return str(settings.get("backend", "default"))
        return self.backend if isinstance(self.backend, str) else self.backend(settings)


#: every stage, by name, in declaration order (change it with declare_stage / remove_stage)
STAGE_DECLARATIONS: dict[str, StageDeclaration] = {}


def declare_stage(decl: StageDeclaration, *, replace: bool = False) -> StageDeclaration:
    """Add a stage to the pipeline (``replace``: a stage of that name is replaced in place)."""
    if decl.name in STAGE_DECLARATIONS and not replace:
        raise ValueError(f"stage {decl.name!r} is declared already")
    if not (isinstance(decl.settings, type) and issubclass(decl.settings, StageSettings)):
        raise TypeError(f"stage {decl.name!r}: settings must be a StageSettings model, got {decl.settings!r}")
    STAGE_DECLARATIONS[decl.name] = decl
    return decl


def remove_stage(name: str) -> None:
    """Take a stage out of the pipeline (a test's toy stage)."""
    STAGE_DECLARATIONS.pop(name)


def stage_order() -> list[str]:
    """The execution order: each stage after the stages it reads, in declaration order otherwise
    (a stable topological order); a dependency on an undeclared stage or a cycle raises."""
    decls = STAGE_DECLARATIONS
    for d in decls.values():
        for dep in d.deps:
            if dep not in decls:
                raise SettingsError(f"stage {d.name!r} reads {dep!r}, which is not a declared stage"
                                    f"{did_you_mean(dep, decls)}")
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(decls):
        ready = next((n for n, d in decls.items() if n not in placed and placed.issuperset(d.deps)), None)
        if ready is None:
            raise SettingsError(f"stages {', '.join(n for n in decls if n not in placed)} read each other in a cycle")
        order.append(ready)
        placed.add(ready)
    return order


class IngestSettings(StageSettings):
    max_side: int | None = Field(640, ge=16, description="long side after scaling (None: keep the size)")
    max_frames: int | None = Field(None, ge=1, description="a cap, recorded per video (None: every frame)")
    max_bad_frames: int = Field(0, ge=0, description="decode errors + lost frames tolerated")
    cut_threshold: float = Field(0.4, ge=0.0, le=1.0, description="colour-histogram change that marks a cut "
                                                                  "between shots (models/shared/shots.py); 0: one shot")
    cut_structure: float = Field(0.3, ge=0.0, le=2.0, description="change of the grey thumbnail's layout (1 - "
                                                                  "correlation) that also marks a cut: two views of "
                                                                  "one room share their colours; 0: colours only")


declare_stage(StageDeclaration(
    "ingest", IngestSettings, run="anonymask.tasks.ingest:run", backend="pyav",
    external="anonymask.tasks.identity:source_identity", prepare="anonymask.tasks.identity:prepare_source",
))


class Pose4dSettings(StageSettings):
    backend: str = "mediapipe"
    window: int = _window()


declare_stage(StageDeclaration(
    "pose4d", Pose4dSettings, run="anonymask.tasks.pose4d:run", deps=("ingest",),
    sub_backends=(NamedBackend("detector", "detector_options", "person_detector"),),
    # 2: ``pose/instance_track`` may hold REJECTED_TRACK (-2, a raw track verified not to be a
    # person, models/anonymizer/pose/verify.py), which segment treats as background
    layout_version=2,
    # 2: still people found by the anchored scan (issue 8b) and a person found late behind someone
    # held before (``bridge_before_late_start``); 3: a face is explained only by an avatar head on
    # it, not by any person's box around it (a close-up's face was left to the fill); 4: the region
    # around a face that a body's avatar explains is removed with that body (faces.explained_regions)
    privacy_version=4,
))


class MotionSettings(StageSettings):
    enabled: bool = False
    checkpoint: str | None = None


declare_stage(StageDeclaration(
    "motion", MotionSettings, run="anonymask.tasks.motion:run", deps=("pose4d",),
    backend=lambda c: "skeleton-anonymizer" if c.get("enabled") else "disabled",
))


class RenderSettings(StageSettings):
    bank_size: int = Field(32, ge=1)
    bank_seed: int = 0
    skeleton_tol_m: float | None = Field(
        0.02, gt=0.0, description="metres: an avatar's body shape moves no rest joint further than this from the "
                                  "neutral skeleton the person was fitted with, so its joints land on the person's "
                                  "(2 cm, about 5 px for a person 2 m from a 640-px camera, is well under the fit's own "
                                  "joint error, MPJPE 30-230 mm on the synthetic sets; None: shapes drawn freely, "
                                  "bone lengths included)")
    # the body model is unclothed: a bare avatar is thinner than the dressed person whose hole it
    # stands in, and what it leaves of their outline is filled with made-up background
    cloth_m: tuple[float, float] = Field(
        (0.01, 0.03), description="metres shirts and trousers stand off the body, fitted to loose (each avatar draws "
                                  "where it lies between them): a regular shirt's 10-14 cm of chest ease over the body's "
                                  "girth is about 2 cm of radius; (0, 0): the bare body")
    hair_m: float = Field(0.015, ge=0.0, description="metres short hair stands off the scalp (long hair half again)")
    shoes_m: float = Field(0.01, ge=0.0, description="metres a shoe's sole and upper add around the foot")

    @field_validator("cloth_m")
    @classmethod
    def _cloth_range(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= v[0] <= v[1]:
            raise ValueError(f"render.cloth_m must be (fitted, loose) with 0 <= fitted <= loose, not {v}")
        return v
    # 16, not 64: a window's rendered layers cost ~0.6 MB per alive track and frame (60-s scaling
    # video: peak 1.41 GiB at 64, 1.09 at 16, the same speed; docs/BENCHMARKS.md, run 5)
    window: int = _window(16)
    # an avatar wherever the hole of its person can be: segment widens each person's hole by
    # segment.unflicker frames past their track (validate_pipeline keeps this >= that)
    hold_ends: int = Field(1, ge=0, description="frames each track's first and last pose are held "
                                                "before and after it, within its shot")


declare_stage(StageDeclaration(
    "render", RenderSettings, run="anonymask.tasks.render:run", deps=("pose4d", "motion"), backend="pyrender",
    layout_version=2,  # 2: per-track arrays over each track's own frames (storage/tracks.py)
))


class SegmentSettings(StageSettings):
    backend: str = "mediapipe"
    threshold: float = Field(0.5, gt=0.0, le=1.0)
    unflicker: int = Field(1, ge=0, description="frames either side a pixel's vote is taken over")
    grow: int | Literal["auto"] = Field("auto", description="safety margin in px, or auto")
    # the leaks left on the synthetic sets were 1-2 px at hands, heads and feet; 0.03 of the height
    # keeps them under the 0.1% the audit allows for ~8% more removed area than 0.02 (docs/RESULTS.md,
    # "a wider safety margin")
    grow_frac: float = Field(0.03, ge=0.0, le=0.5, description="auto: this share of the people's height")
    grow_min: int = Field(2, ge=0)
    grow_max: int = Field(8, ge=0)
    # the feet: most leaked pixels left on the demo were ankles and feet, outside the margin that
    # holds everywhere else (docs/RESULTS.md, "Verdicts with margin")
    contact_band: float = Field(0.15, ge=0.0, le=1.0, description="share of a person blob's height, up from its "
                                "lowest pixel, that gets the feet's margin (feet and ankles)")
    contact_frac: float = Field(0.08, ge=0.0, le=0.5, description="the feet's margin as a share of that blob's "
                                "height (0: the same margin as everywhere); segmentation misses shoes against "
                                "the floor and fits place feet worst")
    contact_max: int = Field(12, ge=0, description="px: the feet's margin at most (a near person's huge feet)")
    # the hands: after the margin and the feet's, most leaked pixels left on the synthetic sets
    # were hands (docs/RESULTS.md, "where the leak is")
    hand_frac: float = Field(0.1, ge=0.0, le=0.5, description="radius of a disc around each avatar's "
                             "wrists, as a share of that person's box height (0: none): about a hand's length "
                             "(~0.1 of stature), so the hand is inside whichever way it points; segmentation "
                             "drops hands and fits place them worst")
    # what moves with a person just outside their mask: a limb the segmentation cut (a leg kicked
    # back against a dark tyre was the demo's last leak; docs/RESULTS.md, "foreground")
    foreground: bool = Field(True, description="add the pixels next to a person, connected to their mask, "
                             "that differ from the shot's background where nobody is "
                             "(models/anonymizer/segment/foreground.py)")
    foreground_tol: float = Field(25.0, ge=0.0, le=255.0, description="grey levels (any channel) a pixel must "
                                  "differ from the background by: above sensor noise (sigma 4) and heavy "
                                  "compression, below a limb against the scene")
    foreground_reach: float = Field(0.15, ge=0.0, le=1.0, description="how far from a person's mask, as a "
                                    "share of their box height, such pixels are taken: a forearm or a shin "
                                    "(0.15 of stature), not the room")
    foreground_max_scene_change: float = Field(0.05, ge=0.0, le=1.0, description="share of a frame's pixels "
                                               "away from people that may differ from the background: above it "
                                               "the camera or the light moved and the frame gets nothing (still "
                                               "cameras measured up to 0.04, a moving one 0.67)")
    # the margins above guess where a person might be; on a still shot a margin pixel that shows its
    # place as it is with nobody near shows nothing of them (docs/RESULTS.md, "margin pixels that
    # show the scene")
    trim_scene: bool = Field(True, description="a margin pixel (beyond the safety margin of the person's own mask) "
                             "whose colour is "
                             "the one its place has when nobody is within foreground_reach of it is left out "
                             "of the hole, on frames the shot's background still describes "
                             "(models/anonymizer/segment/scene_trim.py)")
    trim_tol: float = Field(8.0, ge=0.0, le=255.0, description="grey levels (every channel) within which such a "
                            "pixel shows the place: twice the sensor noise of phone and webcam footage (sigma "
                            "about 4), under the 10 at which the audit's ground truth counts a pixel as telling "
                            "a person from the place")
    feather: float = Field(2.0, ge=0.0)
    box_fill: bool = False
    fallback_box_fill: bool = Field(True, description="a person drawn as a neutral avatar in their box (seen too "
                                    "briefly to pose, or a fit that disagreed with their box) has no known body "
                                    "shape: their whole box is removed in every frame they have one")
    box_margin: float = Field(0.15, ge=0.0, le=1.0)
    rejected_box_frames: int = Field(
        3, ge=1, description="frames (odd) a kept person's box is a per-coordinate median over where it decides "
                             "which pixels of a track verification dropped stay removed (inside a kept box: "
                             "someone may pass in front of the clutter). 3: a box that jumps out and back within "
                             "one frame does not remove a dropped phantom's pixels for that frame alone, which "
                             "left a hole no avatar covers; a box that moves on for good is followed from the "
                             "frame it moves. 1: each frame's own box (docs/RESULTS.md, 'the yolo preset')")
    avatar_in_hole: bool = False
    static_grow: int = Field(4, ge=0)
    static_frac: float = Field(0.8, gt=0.0, le=1.0)
    static_extend: float = Field(0.5, gt=0.0, le=1.0, description="share of a static_window block's frames a "
                                 "pixel must be in the mask to join a still region it touches (hysteresis: the "
                                 "detector loses a still person's head or feet for a while when someone passes)")
    static_reach: float = Field(0.3, ge=0.0, description="how far (a share of the still part's height) such a "
                                "pixel may lie from it: a lost head or foot is next to its body, clutter seen "
                                "now and then beyond that stays out")
    replace_margin: int = Field(3, ge=0, description="px an avatar may miss its person by (replaced_min)")
    static_window: int = Field(WINDOW_FRAMES, ge=2, description="frames per block that decides who stands still")
    # 16, not 64: a window holds each alive track's masks (60-s scaling video: peak 1.73 GiB at
    # 64, 0.95 at 16, the same speed and bit-identical outputs; docs/BENCHMARKS.md, run 5)
    window: int = _window(16)


declare_stage(StageDeclaration(
    "segment", SegmentSettings, run="anonymask.tasks.segment:run", deps=("ingest", "pose4d", "render"),
    layout_version=2,  # 2: per-track arrays over each track's own frames (storage/tracks.py)
))


class InpaintSettings(StageSettings):
    backend: str = "temporal_median"
    # a long video is inpainted window by window: these change results (the median of a window)
    window: int = Field(WINDOW_FRAMES, ge=1, description="frames per window (a video up to window + 2 * "
                                                         "context frames is one window)")
    context: int = Field(16, ge=0, description="frames either side of a window its median also sees")
    sample_frames: int = Field(96, ge=1, description="frames spread over the video for never-uncovered pixels")
    # a temporal median needs a still camera: a shot whose view moves takes this backend instead
    # (docs/RESULTS.md, "moving shots filled from their aligned frames")
    moving_camera: str = Field("aligned_median", description="backend for a shot whose camera moves ('same': "
                                                             "the backend above for every shot)")
    camera_drift: float = Field(0.012, gt=0.0, description="view shift (share of the width) over a shot "
                                                          "above which its camera counts as moving")
    # synthetic data only (ground truth in the store): a second fill of the person-free video, so
    # the audit can tell a fill that matches a person by chance from one made of them
    person_free_check: bool = Field(True, description="with ground truth: also fill the holes of the "
                                                      "person-free video (fill_coincident)")

    @field_validator("moving_camera")
    @classmethod
    def _known_backend(cls, v: str) -> str:
        known = sorted(backends("inpaint"))
        if v != "same" and v not in known:
            raise ValueError(f"must be 'same' or an inpaint backend ({', '.join(known)}), got {v!r}")
        return v


declare_stage(StageDeclaration(
    "inpaint", InpaintSettings, run="anonymask.tasks.inpaint:run", deps=("ingest", "segment"),
    # 2: the opencv backend no longer returns a frame that is all hole unchanged; 3: a video over
    # PERSON_FREE_MAX_BYTES gets its fill_coincident too (before: none, the audit counted every pixel)
    privacy_version=3,
    layout_version=2,  # 2: fill_made_up, the hole pixels the fill made up (the audit reads it)
))


class MergeSettings(StageSettings):
    window: int = _window()


declare_stage(StageDeclaration(
    "merge", MergeSettings, run="anonymask.tasks.merge:run", deps=("inpaint", "render"), backend="alpha",
))


class TubeletSettings(StageSettings):
    size: int = Field(128, ge=8)
    margin: float = Field(0.15, ge=0.0, le=1.0)
    smooth: float = Field(3.0, ge=0.0)
    context: int = Field(8, ge=0, description="frames a tubelet extends past its person's first and last "
                                              "frame (its box held there): a refiner's temporal context")
    window: int = _window()
    open_writers: int = Field(16, ge=1, json_schema_extra={"hashed": False},
                              description="tubelets cropped per pass over the video: memory only")


declare_stage(StageDeclaration(
    "tubelets", TubeletSettings, run="anonymask.tasks.tubelets:run", deps=("merge", "render", "segment"),
    backend="smooth-square",
    # 2: each tubelet over its person's frames plus ``context``, not the whole video (tasks/tubelets.py)
    layout_version=2,
))


class ConditionSettings(StageSettings):
    backend: str = "render"
    window: int = _window()


declare_stage(StageDeclaration(
    "conditions", ConditionSettings, run="anonymask.tasks.conditions:run", deps=("tubelets", "render"),
))


class RefineSettings(StageSettings):
    backend: str = "none"
    seed: int = 0
    segment_frames: int = Field(256, ge=2, description="animatediff: frames refined at a time")
    copy_window: int = _window(4 * WINDOW_FRAMES)


declare_stage(StageDeclaration(
    "refine", RefineSettings, run="anonymask.tasks.refine:run", deps=("tubelets", "conditions"),
))


class ReintegrateSettings(StageSettings):
    # 16, not 64: a window holds each alive track's alpha and silhouette (on the 10-s scaling video
    # peak 0.83 GiB at 64, 0.53 at 16, the same speed, bit-identical: docs/BENCHMARKS.md, run 7)
    window: int = _window(16)


declare_stage(StageDeclaration(
    "reintegrate", ReintegrateSettings, run="anonymask.tasks.reintegrate:run",
    deps=("inpaint", "refine", "tubelets", "segment", "render"), backend="feather",
))


class AuditSettings(StageSettings):
    detectors: list[str] = Field(default_factory=lambda: ["face", "hog"], min_length=1)
    detector_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    every: int = Field(4, ge=1)
    min_outside: float = Field(0.6, ge=0.0, le=1.0)
    min_face_frames: int = Field(2, ge=1)
    min_body_frames: int = Field(3, ge=1)
    fail: bool = True
    ground_truth: bool = True
    max_gt_leak: float = Field(0.001, ge=0.0, le=1.0)
    gt_strict: bool = Field(False, description="count hole pixels whose fill matches the person by chance (the "
                                               "same fill without them) as leaked")
    refind: bool = Field(True, description="a face or body found outside the avatars counts only if the same "
                                           "detector finds it again with the avatars taken out (a real person "
                                           "beside an avatar does not need its pixels to be seen; a detector box "
                                           "that an avatar's head completes into a face on clutter does)")
    refind_iou: float = Field(0.3, ge=0.0, le=1.0, description="box IoU that makes a detection on the frame "
                                                               "without avatars the same candidate")
    source_check: bool = Field(True, description="a face or body found mostly on the source frame's own pixels "
                                                 "(less than source_max_fill of its centre is hole) counts only if "
                                                 "the same detector finds it on the source frame too: a real person "
                                                 "there is on the source; one the output's changes around it make "
                                                 "up is not (false: no such check)")
    source_max_fill: float = Field(0.5, ge=0.0, le=1.0,
                                   description="share of a candidate's centre filled from other frames (the hole) "
                                               "from which on the source check does not excuse it: a person the fill "
                                               "copied from another frame could be what the detector sees")
    source_cover: float = Field(0.5, gt=0.0, le=1.0,
                                description="share of the candidate's box that a detection on the source frame "
                                            "must cover to be the same person (a box, not IoU: on the source the "
                                            "person may be boxed together with the one the output replaced)")
    made_up_fill: bool = Field(True, description="hole pixels the inpainting made up (a spatial fill where no "
                                                 "frame shows the place without a person: inpaint's fill_made_up) "
                                                 "count as drawn, like avatar pixels: they hold no real pixel, so "
                                                 "a face or body found on them is the fill's (false: only avatar "
                                                 "pixels count)")
    erased: bool = Field(True, description="fail a video where a person is removed without an avatar")
    erased_min_share: float = Field(0.5, gt=0.0, description="smallest uncovered hole region that is a person, "
                                                              "as a share of the video's median hole area")


declare_stage(StageDeclaration(
    "audit", AuditSettings, run="anonymask.tasks.audit:run", deps=("reintegrate", "render", "segment", "inpaint"),
    backend=lambda c: "+".join(c["detectors"]),
    sub_backends=(BackendList("detectors", "detector_options", "audit"),),
))


def _unhashed(model: type[BaseModel]) -> set[str]:
    return {k for k, f in model.model_fields.items() if (f.json_schema_extra or {}).get("hashed") is False}


def validate_stage(stage: str, values: dict[str, Any] | None) -> dict[str, Any]:
    """The stage's settings, validated and complete (raises ``SettingsError`` naming each problem)."""
    if stage not in STAGE_DECLARATIONS:
        raise SettingsError(f"unknown pipeline stage {stage!r}{did_you_mean(stage, STAGE_DECLARATIONS)}; "
                            f"stages: {', '.join(STAGE_DECLARATIONS)}")
    values = dict(values or {})
    decl = STAGE_DECLARATIONS[stage]
    model = decl.settings
    own = {k: v for k, v in values.items() if k in model.model_fields}
    rest = {k: v for k, v in values.items() if k not in model.model_fields}
    out = validate_model(model, own, stage).model_dump()
    if "backend" in model.model_fields:
        be = get_backend(stage, out["backend"])
        renamed = getattr(be.factory, "RENAMED", {})
        for k, v in rest.items():  # a setting of the old flat layout (a bool where a sub-tree is now)
            if k in renamed and not isinstance(v, dict):
                raise SettingsError(f"{stage}.{k} is now {stage}.{renamed[k]} (--set {stage}.{renamed[k]}="
                                    f"{json.dumps(v)})")
        stray = [k for k in rest if k not in be.settings.model_fields]
        if stray:  # only now the other backends' settings (a heavy one imports its module)
            k = stray[0]
            others = {key: n for n, b in backends(stage).items() if n != be.name for key in b.settings.model_fields}
            if k in others:
                raise SettingsError(f"{stage}.{k} is a setting of backend {others[k]!r}, not of the selected "
                                    f"backend {be.name!r}")
            known = [*model.model_fields, *be.settings.model_fields]
            raise SettingsError(f"{stage}: unknown setting {k!r}{did_you_mean(k, known)}; "
                                f"settings of {stage} with backend {be.name!r}: {', '.join(known)}")
        out.update(be.validate(rest).model_dump())
    elif rest:
        k = next(iter(rest))
        raise SettingsError(f"{stage}: unknown setting {k!r}{did_you_mean(k, model.model_fields)}; "
                            f"settings of {stage}: {', '.join(model.model_fields)}")
    for sub in decl.sub_backends:
        sub.validate(stage, out)
    return out


@functools.cache
def _typed_model(stage_model: type[StageSettings], backend_model: type[BaseModel] | None, name: str):
    """``stage_model`` with ``backend_model``'s fields added (one class per pair, cached)."""
    if backend_model is None:
        return stage_model
    extra = {k: (f.annotation, f) for k, f in backend_model.model_fields.items() if k not in stage_model.model_fields}
    return create_model(name, __base__=stage_model, __module__=__name__, **extra)


def stage_settings(stage: str, values: StageSettings | dict[str, Any] | None) -> StageSettings:
    """A stage's typed settings: its model (``SegmentSettings``) joined with its selected backend's
    settings (``segment.backend=mediapipe``: ``SegmentSettings[mediapipe]``), frozen, read as
    attributes (``s.grow``). Typed settings are returned as they are (validated once); a dict is
    validated (:func:`validate_stage`). ``to_dict()`` gives back exactly the validated dict, so
    the stage hash is the same as that of the dict."""
    if isinstance(values, StageSettings):
        return values
    validated = validate_stage(stage, values)
    return typed_settings(stage, validated)


def typed_settings(stage: str, validated: dict[str, Any]) -> StageSettings:
    """The typed object of a dict :func:`validate_stage` returned (its nested sections typed too:
    pose4d's ``discover``, ``link``, ...); ``to_dict()`` returns that dict."""
    decl = STAGE_DECLARATIONS[stage]
    be = get_backend(stage, validated["backend"]) if "backend" in decl.settings.model_fields else None
    model = _typed_model(decl.settings, be.settings if be is not None else None,
                         f"{decl.settings.__name__}[{be.name}]" if be is not None else decl.settings.__name__)
    stray = set(validated) - set(model.model_fields)
    if stray:  # never silently dropped: the hash is made of every key
        raise SettingsError(f"{stage}: settings {', '.join(sorted(stray))} are not fields of {model.__name__}")
    out = model.model_validate(validated)
    out._validated = copy.deepcopy(validated)
    return out


class PipelineSettings:
    """Every stage's typed settings (:func:`stage_settings`), validated once at the edge (the CLI,
    the flow's parameters) and passed down: ``settings.segment.grow``, ``settings["segment"]``.
    ``to_dict()`` is the validated dict of dicts (Prefect parameters, the store's attrs, hashing).
    A plain class on purpose: Prefect passes it to a task as it is, without rebuilding it."""

    __slots__ = ("_stages",)

    def __init__(self, stages: dict[str, StageSettings]):
        object.__setattr__(self, "_stages", dict(stages))

    @classmethod
    def of(cls, config: PipelineSettings | dict[str, Any]) -> PipelineSettings:
        """Typed settings as they are; a dict of stage sections validated (:func:`validate_pipeline`)."""
        if isinstance(config, PipelineSettings):
            return config
        validated = validate_pipeline(config)
        return cls({stage: typed_settings(stage, section) for stage, section in validated.items()})

    def __getattr__(self, stage: str) -> StageSettings:
        if stage.startswith("_"):  # not a stage (copy, pickle and the slot itself ask for these)
            raise AttributeError(stage)
        try:
            return self._stages[stage]
        except KeyError:
            raise AttributeError(f"no stage {stage!r}{did_you_mean(stage, self._stages)}") from None

    def __getitem__(self, stage: str) -> StageSettings:
        return self._stages[stage]

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("PipelineSettings is frozen")

    def __contains__(self, stage: str) -> bool:
        return stage in self._stages

    def __iter__(self) -> Iterator[str]:
        return iter(self._stages)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PipelineSettings) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PipelineSettings({', '.join(self._stages)})"

    def __reduce__(self):
        return PipelineSettings.of, (self.to_dict(),)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {stage: s.to_dict() for stage, s in self._stages.items()}


def stage_backend(stage: str, settings: StageSettings | dict[str, Any], **runtime: Any) -> Any:
    """The backend a stage's validated settings name, built with its own settings from them."""
    if isinstance(settings, StageSettings):
        settings = settings.to_dict()
    be = get_backend(stage, settings["backend"])
    return be.create(_own(be, settings), **runtime)


def hashed_settings(stage: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What the stage hash covers: every validated setting except the ``hashed=False`` ones, and
    the stage's layout and privacy versions when it has them."""
    decl = STAGE_DECLARATIONS.get(stage)
    skip = _unhashed(decl.settings) if decl is not None else set()
    out = {k: v for k, v in settings.items() if k not in skip}
    if decl is not None and decl.layout_version is not None:
        out["_layout"] = decl.layout_version
    if decl is not None and decl.privacy_version is not None:
        out["_privacy"] = decl.privacy_version
    return out


def validate_pipeline(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every stage's section validated (stages absent from ``config`` get their defaults)."""
    unknown = [k for k in config if k not in STAGE_DECLARATIONS]
    if unknown:
        k = unknown[0]
        raise SettingsError(f"unknown pipeline stage {k!r}{did_you_mean(k, STAGE_DECLARATIONS)}; "
                            f"stages: {', '.join(STAGE_DECLARATIONS)}")
    for stage, section in config.items():
        if not isinstance(section, dict):
            raise SettingsError(f"{stage}: settings must be key=value pairs (e.g. --set {stage}.key=value), "
                                f"got {section!r}")
    out = {stage: validate_stage(stage, config.get(stage)) for stage in STAGE_DECLARATIONS}
    if out["render"]["hold_ends"] < out["segment"]["unflicker"]:
        raise SettingsError(
            f"render.hold_ends ({out['render']['hold_ends']}) is less than segment.unflicker "
            f"({out['segment']['unflicker']}): the hole of a person reaches {out['segment']['unflicker']} "
            f"frame(s) past their track, and with fewer frames of held avatar there the person is erased, "
            f"not replaced (the audit fails the video); set render.hold_ends={out['segment']['unflicker']}")
    return out


def check_weights(config: dict[str, dict[str, Any]]) -> None:
    """Every weight-backed backend a validated pipeline selects finds its files (stage backends,
    the pose4d person detector, the audit detectors); else ``MissingWeightsError`` naming them,
    before any video is touched (not after hours of work, at the stage that needs them)."""
    for stage, section in config.items():
        decl = STAGE_DECLARATIONS.get(stage)
        if decl is None:
            continue
        section = section or {}
        if "backend" in decl.settings.model_fields and "backend" in section:
            be = get_backend(stage, section["backend"])
            be.check_weights(_own(be, section))
        for sub in decl.sub_backends:
            sub.check_weights(section)
