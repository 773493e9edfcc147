"""A dim shot is brightened for the person models, one gain per shot (models/anonymizer/pose/exposure.py):
well-exposed footage is left as it is, and on dimmed real footage the person a dim picture hides
from the landmark model is found again."""

import numpy as np
import pytest

from anonymask.models.anonymizer.pose.exposure import brightened, gain_table, luminance_level, shot_gain
from anonymask.models.anonymizer.pose.settings import ExposureSettings, MediapipePoseSettings


def _dim(frames: np.ndarray, scale: float, gamma: float) -> np.ndarray:
    """Less light and a darker tone curve, the way the footage variants darken (scripts/footage_variants.py)."""
    return np.clip(np.rint(255.0 * scale * (frames.astype(np.float32) / 255.0) ** gamma), 0, 255).astype(np.uint8)


def _p99(frames: np.ndarray) -> float:
    return luminance_level(frames, 99)


def test_well_exposed_real_footage_is_left_as_it_is(pose2sim_frames):
    s = ExposureSettings()
    for name in ("Demo_MultiPerson/videos/cam02.mp4", "Demo_SinglePerson/videos/cam01.mp4"):
        assert shot_gain(pose2sim_frames(name), s) == 1.0, name
    assert gain_table(1.0) is None


def test_a_dim_shot_is_brought_to_the_target_and_no_further_than_max_gain(pose2sim_frames):
    s = ExposureSettings()
    dim = _dim(pose2sim_frames(), 0.45, 1.4)
    g = shot_gain(dim, s)
    assert 1.0 < g < s.max_gain
    assert abs(_p99(gain_table(g)[dim]) - s.target) < 8  # rounding and clipping at 255
    very = _dim(pose2sim_frames(), 0.05, 1.0)
    assert shot_gain(very, s) == s.max_gain
    assert shot_gain(dim, ExposureSettings(enabled=False)) == 1.0
    table = gain_table(2.5)
    assert table[0] == 0 and table[255] == 255 and np.all(np.diff(table.astype(int)) >= 0)  # order kept


def test_the_gain_comes_from_the_whole_shot_not_its_first_window():
    """A shot that opens on black (a fade-in) and is well exposed after is not brightened; read
    frames and windows get the same table."""
    s = ExposureSettings()
    rng = np.random.default_rng(0)
    video = rng.integers(0, 256, (40, 24, 32, 3), dtype=np.uint8)
    video[:8] //= 8  # a dark opening

    def read(a, b):
        return video[a:b]

    windows = [(t0, video[t0:t0 + 8]) for t0 in range(0, 40, 8)]
    r, w, gain = brightened(read, windows, 40, s)
    assert gain == 1.0 and r is read
    assert all(np.array_equal(f, video[t0:t0 + 8]) for t0, f in w)

    dark = (video // 4).astype(np.uint8)
    r, w, gain = brightened(lambda a, b: dark[a:b], [(t0, dark[t0:t0 + 8]) for t0 in range(0, 40, 8)], 40, s)
    table = gain_table(gain)
    assert gain > 1.0 and np.array_equal(r(3, 9), table[dark[3:9]])
    assert all(np.array_equal(f, table[dark[t0:t0 + 8]]) for t0, f in w)
    # no reader (a caller that only streams): the first window decides
    _, w, g0 = brightened(None, [(t0, dark[t0:t0 + 8]) for t0 in range(0, 40, 8)], 40, s)
    assert g0 == shot_gain(dark[:8], s) and len(list(w)) == 5


def _tracks(frames: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Person discovery with production's settings over ``frames``: (frames seen, first box) per track."""
    from anonymask.models.anonymizer.pose.discover import PersonDiscovery
    from anonymask.models.anonymizer.pose.people import get_detector

    s = MediapipePoseSettings()
    disc = PersonDiscovery(get_detector("mediapipe"), s.discover, s.scan, s.evidence, max_gap=s.max_gap,
                           t_len=len(frames), scanner=None)
    for f in frames:
        disc.push(f)
    return [(len(tr.frames), tr.frames[min(tr.frames)].box) for tr in disc.tracker.tracks if tr.frames]


def test_a_person_the_dim_picture_hides_is_found_once_brightened(pose2sim_frames):
    """Pose2Sim's Multi cam02 (three people; a bystander in a mask stands small at the back),
    darkened to a fifth of the light: the landmark model loses the bystander in the dim frames and
    finds all three once the shot's gain is applied. Checked on the frames as they are too: the
    test fails if the dim picture stops hiding her (then it shows nothing)."""
    frames = pose2sim_frames("Demo_MultiPerson/videos/cam02.mp4", 0, 8, 480)
    bystander = np.array([180.0, 121.0, 213.0, 223.0])  # where she stands (x0, y0, x1, y1), found at full light

    def has_her(tracks):
        return any(n >= 6 and np.abs(box - bystander).max() < 12 for n, box in tracks)

    assert has_her(_tracks(frames))
    dim = _dim(frames, 0.2, 1.8)
    assert not has_her(_tracks(dim)), "the dim picture no longer hides her: pick a darker variant"
    g = shot_gain(dim, ExposureSettings())
    assert g > 1.0
    found = _tracks(gain_table(g)[dim])
    assert has_her(found) and len(found) == 3, found


@pytest.mark.parametrize("key", ["dim_below", "target", "max_gain"])
def test_the_settings_are_reachable_from_the_stage(key):
    from anonymask.config.stages import stage_backend, validate_stage

    value = {"dim_below": 90.0, "target": 180.0, "max_gain": 2.0}[key]
    be = stage_backend("pose4d", validate_stage("pose4d", {"exposure": {key: value}}))
    assert getattr(be.settings.exposure, key) == value


def test_status_shows_the_largest_gain_and_how_many_shots_were_brightened():
    from anonymask.models.anonymizer.pose.records import PoseDiagnostics

    a, b, c = PoseDiagnostics(), PoseDiagnostics(exposure_gain=2.4, shots_brightened=1), PoseDiagnostics()
    a.merge(b)
    a.merge(c)
    m = a.metrics()
    assert m["exposure_gain"] == 2.4 and m["shots_brightened"] == 1.0
