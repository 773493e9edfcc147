"""mediapipe's bundled segmentation models on real frames (sports2d's demo video, offline)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from anonymask.models.anonymizer.segment import get_segmenter


def demo_frames(n=3, step=30, width=442, height=248) -> np.ndarray:
    spec = importlib.util.find_spec("Sports2D")
    if spec is None or spec.origin is None:
        pytest.skip("sports2d (demo video) is not installed")
    path = Path(spec.origin).parent / "Demo" / "demo.mp4"
    import av

    frames = []
    with av.open(str(path)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i % step == 0:
                frames.append(frame.to_ndarray(format="rgb24", width=width, height=height))
            if len(frames) == n:
                break
    return np.stack(frames)


# The man standing on the box is at x~100..230, y~0..130 in the 442x248 downscaled frames.
MAN_BOX = (95.0, 0.0, 235.0, 140.0)


@pytest.fixture(scope="module")
def frames():
    return demo_frames()


def test_selfie_segmentation_finds_person_in_crop(frames):
    crop = np.ascontiguousarray(frames[:, 0:130, 100:230])
    prob = get_segmenter("mediapipe", model="selfie", model_selection=0).segment(crop)
    assert prob.shape == crop.shape[:3] and prob.dtype == np.float32
    person = prob > 0.5
    frac = person.mean(axis=(1, 2))
    assert np.all(frac > 0.03) and np.all(frac < 0.5)
    # the person is in the centre columns of the crop, not at its borders
    cols = person.any(axis=1).mean(axis=0)
    assert cols[50:80].mean() > cols[:10].mean()


def test_rois_find_small_person_in_full_frame(frames):
    t = frames.shape[0]
    rois = np.tile(np.asarray(MAN_BOX)[None], (t, 1))
    seg = get_segmenter("mediapipe", model="selfie", model_selection=1)
    prob = seg.segment(frames, rois=rois)
    assert prob.shape == frames.shape[:3]
    person = prob > 0.5
    assert person.sum() > 500
    x0, y0, x1, y1 = (int(v) for v in MAN_BOX)
    inside = person[:, y0:y1, x0:x1].sum()
    assert inside == person.sum()  # probabilities are only pasted inside the ROI


def test_pose_segmentation_mask_option(frames):
    crop = np.ascontiguousarray(frames[:, 0:130, 100:230])
    prob = get_segmenter("mediapipe", model="pose").segment(crop)
    assert prob.shape == crop.shape[:3]
    assert (prob > 0.5).sum() > 200
