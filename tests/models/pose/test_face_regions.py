"""A face that a body's avatar explains still has its person's region removed with that body."""

import numpy as np

from anonymask.models.anonymizer.pose.records import Kind, Person, PoseDiagnostics
from anonymask.models.anonymizer.pose.settings import FaceSettings

EVERY_FRAME = FaceSettings().model_copy(update={"every": 1})  # production's values, every frame looked at


def _run(carphone, settings: FaceSettings):
    """carphone's close-up with one body whose avatar is anchored on his face (it explains the face);
    returns the frames painted per raw id, their regions, the people and the diagnostics."""
    from anonymask.models.anonymizer.pose.estimate import default_camera
    from anonymask.models.anonymizer.pose.face_people import add_face_people
    from anonymask.models.anonymizer.pose.faces import FaceFinder
    from anonymask.models.anonymizer.pose.fallback import box_track
    from anonymask.models.shared.body.model import get_body_model

    t_len, h, w = carphone.shape[:3]
    face, _ = FaceFinder(settings.min_score, settings.upscale_below, settings.duplicate_iou).detect(carphone[0])[0]
    body = get_body_model()
    cam = default_camera(w, h)
    boxes = np.tile(face, (t_len, 1)).astype(np.float32)
    track = box_track(boxes, cam, body, 0, "face", 2)
    people = [Person([5], list(range(t_len)), boxes, np.zeros(t_len, bool), Kind.POSED, track)]
    painted: dict[int, list[tuple[int, np.ndarray]]] = {}

    def paint_frame(t, d, rid):
        full = np.zeros((h, w), bool)
        x0, y0, x1, y1 = d.region
        full[y0:y1, x0:x1] = d.mask >= 0.5
        painted.setdefault(rid, []).append((t, full))

    diag = PoseDiagnostics()
    add_face_people(people, lambda a, b: carphone[a:b], t_len, body.rest_joints(), cam, lambda: body, 6,
                    paint_frame, settings, 2, diag)
    return face, painted, people, diag


def test_the_region_around_a_face_a_body_explains_is_removed_with_that_body(carphone):
    """hard_closeup (docs/RESULTS.md): the landmark model drew a body lying across a close-up's head
    and shoulders; its avatar's head explained the face, so no face person was made, and its own
    mask missed the shirt, which stayed in the output and was copied into the fill. The face's
    segmentation region is now painted as the explaining body's raw id in every frame it is seen."""
    t_len, h = carphone.shape[:2]
    face, painted, people, diag = _run(carphone, EVERY_FRAME)
    assert len(people) == 1 and people[0].kind == Kind.POSED  # explained: no face person of its own
    assert set(painted) == {5}  # painted as the explaining body's raw id, nothing else
    assert sorted(t for t, _ in painted[5]) == list(range(t_len)) and diag.face_regions == t_len
    fx0, fy0, fx1, fy1 = face
    for _, region in painted[5]:
        ys, xs = np.nonzero(region)
        # the person, not only the face: the region reaches his shoulders, well below the face box
        assert region.sum() > 3 * (fx1 - fx0) * (fy1 - fy0)
        assert ys.max() > fy1 + 0.5 * (fy1 - fy0)


def test_without_explained_regions_an_explained_face_paints_nothing(carphone):
    _, painted, people, diag = _run(carphone, EVERY_FRAME.model_copy(update={"explained_regions": False}))
    assert painted == {} and diag.face_regions == 0 and len(people) == 1
