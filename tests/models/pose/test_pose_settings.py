"""pose4d's settings are one typed tree (models/anonymizer/pose/settings.py), validated once and passed down:
the passes of person discovery and what they build have no defaults of their own, every
threshold says its unit and reason, and the flat keys of before are errors that name the new key."""

import inspect

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
