"""Pose tests share one procedural SMPL-H body model, generated once per session into a temp cache."""


import numpy as np
import pytest


@pytest.fixture(scope="session")
def body(procedural_body_cache):
    """The procedural body model (never the user's licensed files: results must not depend on them)."""
    from anonymask.models.shared.body.model import get_body_model

    return get_body_model()


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def synthetic_motion(body, t_len: int = 10, seed: int = 0, pelvis=(0.3, 0.2, 3.5)):
    """A smooth, plausible known motion (SMPLHTrack) in the camera frame: walking-like swings of
    hips, knees, shoulders and elbows, the body turning slowly, drifting sideways."""
    from anonymask.models.shared.body.tracks import JOINT_INDEX, SMPLHTrack, upright_orient

    r = np.random.default_rng(seed)
    s = np.linspace(0.0, 1.0, t_len)[:, None]
    phase = r.uniform(0, 2 * np.pi)
    swing = np.sin(np.pi * s + phase)  # half a stride over the clip (~1/3 s at 30 fps)
    bp = np.zeros((t_len, 21, 3))
    j = {n: JOINT_INDEX[n] - 1 for n in ("left_hip", "right_hip", "left_knee", "right_knee",
                                         "left_shoulder", "right_shoulder", "left_elbow", "right_elbow", "spine1")}
    bp[:, j["left_hip"], 0] = -0.5 * swing[:, 0]
    bp[:, j["right_hip"], 0] = 0.5 * swing[:, 0]
    bp[:, j["left_knee"], 0] = 0.6 + 0.4 * swing[:, 0]
    bp[:, j["right_knee"], 0] = 0.6 - 0.4 * swing[:, 0]
    bp[:, j["left_shoulder"], 2] = -1.1 + 0.3 * swing[:, 0]
    bp[:, j["right_shoulder"], 2] = 1.1 + 0.3 * swing[:, 0]
    bp[:, j["left_elbow"], 1] = -0.3 - 0.5 * (1 + swing[:, 0]) / 2
    bp[:, j["right_elbow"], 1] = 0.3 + 0.5 * (1 - swing[:, 0]) / 2
    bp[:, j["spine1"], 0] = 0.15 * swing[:, 0]
    bp += r.normal(scale=0.05, size=(1, 21, 3))  # a personal posture, constant over time
    yaw = r.uniform(-0.6, 0.6) + 0.5 * s[:, 0]
    go = np.stack([upright_orient(y) for y in yaw])
    pel = np.asarray(pelvis, float) + np.concatenate([0.4 * s, 0.0 * s, -0.3 * s], 1)
    tr = body.transl_for(np.zeros(10), pel)
    z = np.zeros((t_len, 45))
    return SMPLHTrack(0, np.zeros(10), go, bp.reshape(t_len, 63), z, z, tr)


@pytest.fixture
def discovery():
    """``discovery(detector, t_len=None, scanner=None, **changes)``: a ``PersonDiscovery`` with
    production's settings (models/anonymizer/pose/settings.py) changed only where a test says so: ``changes``
    are discover settings, or ``scan``/``scan_every``/``evidence`` (the scan's and the second
    opinion's switches) and ``max_gap``."""
    from anonymask.models.anonymizer.pose.discover import PersonDiscovery
    from anonymask.models.anonymizer.pose.people import PeopleDetector
    from anonymask.models.anonymizer.pose.settings import MediapipePoseSettings

    def make(detector=None, t_len=None, scanner=None, **changes):
        prod = MediapipePoseSettings()
        max_gap = changes.pop("max_gap", prod.max_gap)
        scan = prod.scan.model_copy(update={k: changes.pop(o) for o, k in (("scan", "enabled"), ("scan_every", "every"))
                                            if o in changes})
        evidence = prod.evidence.model_copy(update={"enabled": changes.pop("evidence")} if "evidence" in changes else {})
        unknown = set(changes) - set(type(prod.discover).model_fields)
        assert not unknown, f"not discover settings: {unknown}"
        settings = prod.discover.model_copy(update=changes)
        return PersonDiscovery(detector or PeopleDetector(), settings, scan, evidence, max_gap=max_gap, t_len=t_len,
                               scanner=scanner)

    return make


@pytest.fixture
def pose_settings():
    """``pose_settings(**{"faces.enabled": False, "max_gap": 3})``: production's pose4d settings
    tree with dotted changes."""
    from anonymask.models.anonymizer.pose.settings import MediapipePoseSettings

    def make(**changes):
        tree = MediapipePoseSettings().model_dump()
        for key, value in changes.items():
            *path, leaf = key.split(".")
            node = tree
            for p in path:
                node = node[p]
            assert leaf in node, f"no pose4d setting {key!r}"
            node[leaf] = value
        return MediapipePoseSettings.model_validate(tree)

    return make
