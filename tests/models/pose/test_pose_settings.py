"""pose4d's settings are one typed tree (models/anonymizer/pose/settings.py), validated once and passed down:
the passes of person discovery and what they build have no defaults of their own, every
threshold says its unit and reason, and the flat keys of before are errors that name the new key."""

import inspect
import numbers

import pytest

from anonymask.config.stages import validate_stage
from anonymask.core.errors import SettingsError
from anonymask.models.anonymizer.pose import bridge, estimate, exposure, face_people, faces, scan
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


def test_person_discovery_names_no_clip():
    """Rules hold for footage in general: which clips motivated a value is docs/RESULTS.md's job."""
    import re
    from pathlib import Path

    clip = re.compile(r"carphone|bikes\.mp4|\bcam0\d\b|\bs\d\ds\d\d_a\d\d_r\d\d\b|\bs\d\d_a\d\d_r\d\d\b|\bhard_[a-z]+",
                      re.IGNORECASE)
    assert clip.search("the hold in s04s03_a04_r01") and clip.search("Multi cam03")  # the probe finds names
    folder = Path(bridge.__file__).parent
    named = [f"{p.name}:{n}" for p in sorted(folder.glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if clip.search(line)]
    assert not named, named
