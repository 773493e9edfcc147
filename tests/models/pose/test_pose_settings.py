"""pose4d's settings are one typed tree (models/anonymizer/pose/settings.py), validated once and passed down:
the passes of person discovery and what they build have no defaults of their own, every
threshold says its unit and reason, and the flat keys of before are errors that name the new key."""

import inspect
import numbers

import pytest

from anonymask.config.stages import validate_stage
from anonymask.core.errors import SettingsError
from anonymask.models.anonymizer.pose import (
    bridge,
    estimate,
    exposure,
    face_people,
    faces,
    scan,
    second_detector,
    yolo,
)
from anonymask.models.anonymizer.pose.discover import OnlineTracker, PersonDiscovery, add_limbs
from anonymask.models.anonymizer.pose.link import link_tracks
from anonymask.models.anonymizer.pose.settings import RENAMED, MediapipePoseSettings, PassSettings

#: the passes (and the functions and classes they hand settings to)
PASSES = [
    estimate.estimate_people, estimate.estimate_people_by_shot, estimate.discover, estimate.backfill,
    estimate.associate, estimate.fit_people, estimate.bridge, estimate.assemble, estimate.fit_over_spans,
    bridge.bridge_after_end, bridge.bridge_before_late_start, bridge.bridge_across_border, face_people.add_face_people,
    face_people.yield_to_face, face_people.yield_parts_to_face, link_tracks, add_limbs,
    PersonDiscovery.__init__, OnlineTracker.__init__, faces.unexplained_faces, faces.FaceFinder.__init__,
    faces.FaceBodyMask.__init__, faces.FaceBodyMask.confirms, scan.PoseScanner.__init__, scan.PersonEvidence.__init__,
    scan.PersonEvidence.ok, exposure.brightened, exposure.shot_gain, exposure.sample_frames,
    estimate.second_detector, yolo.YoloPersons.__init__, second_detector.sample_confirmations,
    second_detector.split_unconfirmed, second_detector.unconfirmed_spans, second_detector.confirms,
    second_detector.claims, second_detector.claim_boxes, second_detector.crop_verdict, second_detector.part_spans,
]


def own_defaults(fn) -> list[str]:
    """Parameters of ``fn`` that carry a default of their own."""
    return [p.name for p in inspect.signature(fn).parameters.values() if p.default is not inspect.Parameter.empty]


def test_the_check_finds_a_default():
    def a_pass(boxes, settings, edge: float = 0.03):
        return boxes

    assert own_defaults(a_pass) == ["edge"]


@pytest.mark.parametrize("fn", PASSES, ids=lambda f: f.__qualname__)
def test_no_pass_has_a_default_of_its_own(fn):
    assert own_defaults(fn) == [], f"{fn.__qualname__}: take these from models/anonymizer/pose/settings.py"


def numeric_defaults(fn) -> list[str]:
    """Parameters of ``fn`` whose default is a number other than 0 and -1 (a threshold, a size, a
    count: a value that belongs in the settings tree)."""
    return [p.name for p in inspect.signature(fn).parameters.values()
            if isinstance(p.default, numbers.Number) and not isinstance(p.default, bool) and p.default not in (0, -1)]


#: modules of models/anonymizer/pose that are not on the mediapipe backend's path (other backends,
#: with settings of their own)
OTHER_BACKENDS = {"ntu", "rcnn"}

#: functions on the path that may keep numeric defaults, and why
ALLOWED_DEFAULTS = {
    "backends.MediapipePose.__init__": "a registered backend: its signature is its validated settings",
    "backends.NtuSkeletonPose.__init__": "a registered backend: its signature is its validated settings",
    "people.PeopleDetector.__init__": "a registered person detector: its signature is pose4d.detector_options",
    "yolo.YoloPeopleDetector.__init__": "a registered person detector: its signature is pose4d.detector_options",
    "fit._Adam.__init__": "eps: the optimiser's guard against dividing by zero, not a threshold",
}


def pose_path_functions() -> dict[str, object]:
    """Every function and method defined in the modules of the mediapipe pose path, by
    ``module.qualname``; the generated constructors of records (dataclasses: initial values, not
    thresholds) are left out."""
    import dataclasses
    import importlib
    import pkgutil

    import anonymask.models.anonymizer.pose as pose

    out = {}
    for info in pkgutil.iter_modules(pose.__path__):
        if info.name in OTHER_BACKENDS:
            continue
        mod = importlib.import_module(f"{pose.__name__}.{info.name}")
        for name, obj in vars(mod).items():
            if getattr(obj, "__module__", None) != mod.__name__:
                continue
            if inspect.isfunction(obj):
                out[f"{info.name}.{name}"] = obj
            elif inspect.isclass(obj) and not dataclasses.is_dataclass(obj):
                out.update({f"{info.name}.{name}.{k}": v for k, v in vars(obj).items() if inspect.isfunction(v)})
    return out


def test_the_numeric_default_check_finds_one():
    def a_helper(box, grow: float = 0.1, source: str = "frame", phase: int = 0, full: bool = False):
        return box

    assert numeric_defaults(a_helper) == ["grow"]


def test_no_function_on_the_pose_path_keeps_a_threshold_of_its_own():
    """Not only the passes: every helper they call takes its values from the tree (a threshold in a
    helper's signature is one no setting reaches)."""
    found = {q: numeric_defaults(fn) for q, fn in pose_path_functions().items()}
    assert len(found) > 100  # the walk sees the package
    kept = {q: d for q, d in found.items() if d and q not in ALLOWED_DEFAULTS}
    assert not kept, f"take these from models/anonymizer/pose/settings.py: {kept}"
    stale = [q for q in ALLOWED_DEFAULTS if not found.get(q)]
    assert not stale, f"no longer needed in ALLOWED_DEFAULTS: {stale}"


def test_the_fit_takes_every_value_from_the_tree():
    import dataclasses

    from anonymask.models.anonymizer.pose.estimate import fit_config
    from anonymask.models.anonymizer.pose.settings import FitSettings

    tree = FitSettings(iterations=7, lr=0.01, w_2d=2.0, w_3d=1.5, w_prior=0.5, w_smooth=0.2, smooth_sigma=2.0,
                       min_confidence=0.4)
    cfg = fit_config(tree)
    assert {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)} == {
        f.name: getattr(tree, f.name) for f in dataclasses.fields(cfg)}


def _fields(model: type[PassSettings], prefix: str = ""):
    for name, f in model.model_fields.items():
        ann = f.annotation
        if isinstance(ann, type) and issubclass(ann, PassSettings):
            yield from _fields(ann, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", f


def test_every_setting_says_what_it_is_for():
    fields = dict(_fields(MediapipePoseSettings))
    assert len(fields) >= 50  # the tree holds the thresholds, not just the old 21 knobs
    missing = [k for k, f in fields.items() if not (f.description and len(f.description) > 20)]
    assert not missing, missing
    # a number has a range: a negative IoU or gap is an error, not a silent misconfiguration
    unbounded = [k for k, f in fields.items() if f.annotation in (int, float) and not f.metadata]
    assert not unbounded, unbounded


def test_the_backend_is_built_from_the_tree_and_a_change_reaches_the_pass():
    from anonymask.config.stages import stage_backend

    be = stage_backend("pose4d", validate_stage("pose4d", {"bridge": {"follow_motion": 0}, "link": {"gap": 12}}))
    assert be.settings.bridge.follow_motion == 0 and be.settings.link.gap == 12
    assert be.settings.discover == MediapipePoseSettings().discover  # the rest: production's values


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_a_flat_key_of_before_names_its_new_place(old):
    with pytest.raises(SettingsError, match=rf"pose4d\.{old} is now pose4d\.{RENAMED[old]}"):
        validate_stage("pose4d", {old: 1})
    new = validate_stage("pose4d", _nested(RENAMED[old], MediapipePoseSettings().model_dump(), old))
    assert new  # the new key is a real setting


def _nested(path: str, defaults: dict, old: str) -> dict:
    *parents, leaf = path.split(".")
    node = defaults
    for p in parents:
        node = node[p]
    assert leaf in node, f"{old} -> {path}: no such setting"
    out = value = {leaf: node[leaf]}
    for p in reversed(parents):
        value = {p: value}
    return value if parents else out


#: a clip's name (the sample set's, Pose2Sim's views, the demo's and hard set's ids) and a date:
#: rules hold for footage in general, and which clips motivated a value and when is docs/RESULTS.md's job
CLIP = r"carphone|bikes\.mp4|\bcam0\d\b|\bs\d\ds\d\d_a\d\d_r\d\d\b|\bs\d\d_a\d\d_r\d\d\b|(?-i:\bhard_[a-z_]+)"
DATE = r"\b20\d\d-[01]\d-[0-3]\d\b"
#: the synthetic generators define the clips: naming them is their job
DEFINES_CLIPS = ("models/shared/synthetic/",)


def _named_lines(pattern: str, files) -> list[str]:
    import re

    probe = re.compile(pattern, re.IGNORECASE)
    return [f"{p}:{n}" for p in files for n, line in enumerate(p.read_text().splitlines(), 1) if probe.search(line)]


def test_the_clip_probe_finds_names_and_dates(tmp_path):
    f = tmp_path / "rule.py"
    f.write_text("# the hold in s04s03_a04_r01\n# Multi cam03\n# hard_enter_leave\n# before 2026-11-25\n# HARD_CASES\n")
    assert len(_named_lines(CLIP, [f])) == 3 and len(_named_lines(DATE, [f])) == 1


def test_the_models_tasks_and_settings_name_no_clip_and_no_date():
    """Issue 27 item 2: no rule in models/, tasks/ or the settings (config/) names the clip it was
    made for, and no history is kept in the code (both are docs/RESULTS.md's)."""
    from pathlib import Path

    root = Path(bridge.__file__).parents[3]
    files = [p for d in ("models", "tasks", "config") for p in sorted((root / d).rglob("*.py"))
             if not any(str(p.relative_to(root)).startswith(x) for x in DEFINES_CLIPS)]
    assert len(files) > 50
    named = _named_lines(CLIP, files) + _named_lines(DATE, files)
    assert not named, named


#: integers that are facts, not choices, where a function body may write them: -1..3 (counts,
#: halves, axes), a box's 4 coordinates, per cent and the uint8 range; landmark and joint indices
#: are subscripts
STRUCTURAL_INTS = {-1, 0, 1, 2, 3, 4, 100, 255, 256}
#: floats likewise: identities, halves, per cent, the uint8 range
STRUCTURAL_FLOATS = {0.0, 0.5, 1.0, 2.0, 100.0, 255.0}
#: below this a float is a guard against dividing by zero (an epsilon), not a threshold
EPSILON = 1e-3
#: keyword arguments whose value names a mode, not a threshold (OpenCV's pixel neighbourhood)
MODE_KEYWORDS = {"connectivity"}


def literal_thresholds(source: str) -> list[tuple[str, int, object]]:
    """(function, line, value) of every number written in a function body that is not structural:
    such a number is a threshold, a size or a count that belongs in the settings tree, or a named
    module constant that says what it is."""
    import ast

    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):  # indices into landmark and joint arrays
            skip.update(id(n) for n in ast.walk(node.slice))
        elif isinstance(node, ast.keyword) and node.arg in MODE_KEYWORDS:
            skip.update(id(n) for n in ast.walk(node.value))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nodes = [n for stmt in fn.body for n in ast.walk(stmt)]
        for n in nodes:
            if id(n) in skip or not isinstance(n, ast.Constant) or isinstance(n.value, bool):
                continue
            v = n.value
            if isinstance(v, int) and v in STRUCTURAL_INTS:
                continue
            if isinstance(v, float) and (v in STRUCTURAL_FLOATS or 0 < abs(v) <= EPSILON):
                continue
            if isinstance(v, (int, float)):
                found.append((fn.name, n.lineno, v))
    return sorted(set(found), key=lambda f: f[1])


def test_the_literal_check_finds_a_threshold():
    src = ("def follow(d, kp):\n"
           "    if d.score < 0.35 and kp[23, 1] > 0:\n"
           "        return cv2.connectedComponents(d.mask, connectivity=8), max(d.height, 1e-6) * 2.0\n")
    assert literal_thresholds(src) == [("follow", 2, 0.35)]


def test_no_threshold_is_written_inside_a_function_on_the_pose_path():
    """Item 2 of issue 27 to the end: the bodies of the passes and their helpers hold no number
    that is a choice (a threshold, a size, a count); each is a setting with its unit and reason,
    or a module constant that names the fact it is (a model's input size, a landmark count)."""
    from pathlib import Path

    folder = Path(bridge.__file__).parent
    found = {p.name: literal_thresholds(p.read_text()) for p in sorted(folder.glob("*.py"))}
    assert len(found) > 20  # the other backends too: their values are settings or named constants
    left = {k: v for k, v in found.items() if v}
    assert not left, f"name these or move them into models/anonymizer/pose/settings.py: {left}"
