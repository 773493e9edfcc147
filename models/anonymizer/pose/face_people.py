"""Face pass of person discovery: faces that no avatar's head covers become face people.

A close-up, or a body the pose models miss, can leave a face with no avatar on it. Each face seen
in a few frames that no person explains (models/anonymizer/pose/faces.py) and that the segmentation confirms
becomes a person of its own: their segmentation region is painted as a new raw id (removed) and
a neutral avatar anchored on the face covers them (``Kind.FALLBACK_FACE``). Bodies the landmark
model drew on that same person yield their avatar to the face avatar where they lie on them.
A face that a body's avatar does explain is still a person seen: the segmentation region around
it is removed with that body (``explained_regions``), whatever shape the landmark model gave it.
Every value comes from :class:`~anonymask.models.anonymizer.pose.settings.FaceSettings`.
"""

from __future__ import annotations

import numpy as np

from anonymask.models.anonymizer.pose.keypoints import N_LANDMARKS
from anonymask.models.anonymizer.pose.records import Kind, Person, PoseDiagnostics
from anonymask.models.anonymizer.pose.settings import FaceSettings
from anonymask.models.shared.geometry import fill_gaps

#: frames of a face's span read at once
_READ_BLOCK = 64


def add_face_people(people: list[Person], read_frames, t_len: int, rest_joints: np.ndarray, camera, body,
                    next_raw_id: int, paint_frame, settings: FaceSettings, box_smooth: int,
                    diag: PoseDiagnostics) -> None:
    """Append a face person for every confirmed unexplained face (in place on ``people``; raw ids
    from ``next_raw_id`` on; ``paint_frame(t, detection, raw id)`` draws their region, may be
    None). ``people``' tracks are compact (bridged) here. ``body``: () -> the body model;
    ``box_smooth``: frames each side a face person's boxes are averaged over.
    With ``settings.explained_regions``, the region around a face that a person's avatar explains
    is painted as that person's (:func:`paint_explained_regions`)."""
    from anonymask.models.anonymizer.pose.faces import (
        FaceBodyMask,
        FaceFinder,
        avatar_heads,
        unexplained_faces,
    )
    from anonymask.models.anonymizer.pose.fallback import box_track

    every = settings.every
    n_bodies = len(people)
    person_boxes = np.stack([p.boxes for p in people]) if people else np.full((0, t_len, 4), np.nan, np.float32)
    heads = avatar_heads([p.track for p in people], rest_joints, camera, t_len) if settings.heads else None
    finder = FaceFinder(settings.min_score, settings.upscale_below, settings.duplicate_iou)
    explained_by: dict | None = {} if settings.explained_regions and paint_frame is not None else None
    face_tracks = unexplained_faces(read_frames, t_len, person_boxes, finder=finder, settings=settings, heads=heads,
                                    explained_by=explained_by)
    masker = FaceBodyMask(settings.mask_threshold) if face_tracks or explained_by else None
    rid = next_raw_id
    for ft in face_tracks:
        if not masker.confirms(read_frames, ft, settings.confirm_samples, settings.confirm_min_prob):
            diag.faces_rejected += 1
            continue
        fb = fill_gaps(ft.box_array(t_len), 2 * every)[0]
        present = np.nonzero(np.isfinite(fb[:, 0]))[0]
        body_boxes = np.full((t_len, 4), np.nan, np.float32)
        for t, frame in _frames_at(read_frames, present):
            m, body_boxes[t] = _face_region(masker, frame, fb[t], settings.mask_threshold)
            if settings.parts_yield:
                diag.parts_yielded += yield_parts_to_face(people, t, m, body_boxes[t], fb[t], frame, finder,
                                                          settings)
            if paint_frame is not None:
                paint_frame(t, _region_detection(m, body_boxes[t]), rid)
        track = box_track(fb, camera, body(), len(people), "face", box_smooth).compact()
        people.append(Person([rid], sorted(ft.boxes), body_boxes, np.zeros(t_len, bool), Kind.FALLBACK_FACE, track))
        rid += 1
        diag.avatars_yielded += yield_to_face(people, len(people) - 1, fb, settings.yield_iou)
    if explained_by:
        diag.face_regions += paint_explained_regions(people[:n_bodies], explained_by, read_frames, t_len, masker,
                                                     paint_frame, settings)


def paint_explained_regions(people: list[Person], explained_by: dict, read_frames, t_len: int, masker, paint_frame,
                            settings: FaceSettings) -> int:
    """A face seen is a person, whoever's avatar explains it: the connected segmentation region
    around each face that ``people[j]``'s avatar explains (``explained_by[j]``, a
    :class:`~anonymask.models.anonymizer.pose.faces.FaceTrack`, seen at least
    ``settings.min_detections`` times, gaps of up to ``2 x settings.every`` frames bridged) is painted
    as person j's (removed with them) in every frame where they are present. Where the landmark model
    drew a body over a close-up (lying across the head and shoulders), its own mask missed most of
    the person, whose shirt was then left in the output and copied into the fill (docs/RESULTS.md).
    Returns the frames painted."""
    painted = 0
    for j, ft in sorted(explained_by.items()):
        if len(ft.boxes) < settings.min_detections or not people[j].raw_ids:
            continue
        fb = fill_gaps(ft.box_array(t_len), 2 * settings.every)[0]
        present = np.nonzero(np.isfinite(fb[:, 0]) & np.isfinite(people[j].boxes[:, 0]))[0]
        rid = people[j].raw_ids[0]
        for t, frame in _frames_at(read_frames, present):
            m, box = _face_region(masker, frame, fb[t], settings.mask_threshold)
            paint_frame(t, _region_detection(m, box), rid)
            painted += 1
    return painted


def _frames_at(read_frames, present: np.ndarray):
    """(t, frame) for each frame index in ``present`` (sorted), read ``_READ_BLOCK`` of them at a
    time (one read of the span they cover: memory stays one block whatever the video's length)."""
    for a in range(0, len(present), _READ_BLOCK):
        ts = present[a : a + _READ_BLOCK]
        frames = read_frames(int(ts[0]), int(ts[-1]) + 1)
        for t in ts:
            yield int(t), frames[t - ts[0]]


def _face_region(masker, frame: np.ndarray, face: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The person around a face (``masker``'s probability map) and its box (x0, y0, x1, y1)."""
    m = masker(frame, face)
    ys, xs = np.nonzero(m >= threshold)
    return m, np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float32)


def _region_detection(m: np.ndarray, box: np.ndarray):
    """A detection that paints region ``m`` (full-frame probability map) within ``box``."""
    from anonymask.models.anonymizer.pose.people import Detection

    x0, y0, x1, y1 = (int(v) for v in box)
    return Detection(np.asarray(box, np.float32), np.zeros((N_LANDMARKS, 2), np.float32), np.zeros(N_LANDMARKS, np.float32),
                     np.zeros((N_LANDMARKS, 3), np.float32), m[y0:y1, x0:x1].copy(), (x0, y0, x1, y1), 1.0, "face")


def yield_to_face(people: list[Person], f: int, face_boxes: np.ndarray, min_iou: float) -> int:
    """A face track is made where no avatar's head covers a face. In a close-up the landmark model
    often also finds the same person as a body (a body over a close-up's head and
    shoulders), whose avatar, posed wrongly, then stood small beside the face
    avatar, or over it in other clothes. In each frame where another track's box is that of the
    face's person (IoU >= ``min_iou`` with the face track's body box, and holding the face's
    centre), that track's avatar yields: it is not drawn there (``valid`` False). Its pixels stay
    removed (pose/instances, boxes): the face avatar covers them. ``people[f]`` is the face person,
    ``face_boxes`` (T,4) their face. In place; returns the number of frames hidden."""
    from anonymask.models.shared.geometry import box_iou

    fb = people[f].boxes
    hidden = 0
    for j, p in enumerate(people):
        if j == f or p.kind == Kind.FALLBACK_FACE:
            continue
        tr = p.track
        for t in range(tr.start, tr.stop):
            b, face = p.boxes[t], face_boxes[t]
            if not (tr.valid[t - tr.start] and np.all(np.isfinite(b)) and np.all(np.isfinite(fb[t]))
                    and np.all(np.isfinite(face))):
                continue
            cx, cy = (face[0] + face[2]) / 2, (face[1] + face[3]) / 2
            if b[0] <= cx <= b[2] and b[1] <= cy <= b[3] and box_iou(b, fb[t]) >= min_iou:
                tr.valid[t - tr.start] = False
                hidden += 1
    return hidden


def yield_parts_to_face(people: list[Person], t: int, face_mask: np.ndarray, face_body: np.ndarray,
                        face: np.ndarray, frame: np.ndarray, finder, settings: FaceSettings) -> int:
    """In a close-up the landmark model also draws small bodies *on* the face person: on his chest
    and bow tie, on his hair (a real close-up; docs/RESULTS.md). Their avatars stood small
    beside or over the face avatar.
    :func:`yield_to_face` misses them: their boxes are not the face person's box.

    In frame ``t`` a posed body yields (its avatar is not drawn there; its pixels stay removed) when:
    - its box height is at most ``settings.part_height`` x the face person's (``face_body``, their
      segmentation's box);
    - at least ``settings.part_cover`` of its box is the face person's segmentation (``face_mask``, the
      connected regions around the face). A person beside them fills only part of their own box,
      and the rest of the box is background (the measurement behind ``part_cover`` is in
      docs/RESULTS.md);
    - no face of its own is in its box (BlazeFace, ``finder``; the face person's own face,
      IoU >= ``settings.same_face_iou`` with ``face``, does not count). A person in front of the face person has one.
    In place; returns the number of bodies hidden in frame ``t``."""
    from anonymask.models.anonymizer.pose.faces import explained
    from anonymask.models.shared.geometry import box_iou

    min_cover, max_height = settings.part_cover, settings.part_height
    fh = float(face_body[3] - face_body[1])
    h, w = face_mask.shape
    on = face_mask >= 0.5
    faces = None
    hidden = 0
    for p in people:
        tr = p.track
        if p.kind != Kind.POSED or not (tr.start <= t < tr.stop) or not tr.valid[t - tr.start]:
            continue
        b = p.boxes[t]
        if not np.all(np.isfinite(b)) or float(b[3] - b[1]) > max_height * fh:
            continue
        x0, y0 = int(np.clip(np.floor(b[0]), 0, w)), int(np.clip(np.floor(b[1]), 0, h))
        x1, y1 = int(np.clip(np.ceil(b[2]), 0, w)), int(np.clip(np.ceil(b[3]), 0, h))
        if x1 <= x0 or y1 <= y0 or float(on[y0:y1, x0:x1].mean()) < min_cover:
            continue
        if faces is None:
            faces = [fb for fb, _ in finder.detect(frame) if box_iou(fb, face) < settings.same_face_iou]
        if any(explained(f, [b], grow=0.0) for f in faces):  # a face of its own in its box
            continue
        tr.valid[t - tr.start] = False
        hidden += 1
    return hidden
