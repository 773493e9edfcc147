"""Pixels of a raw track pose4d's verification rejected (clutter, no avatar) are background for
segment, except where a kept person's box lies over them."""

import numpy as np

from anonymask.models.anonymizer.pose.verify import REJECTED_TRACK
from anonymask.models.anonymizer.segment.tracks import lut_map, without_rejected


def test_a_rejected_tracks_pixels_are_not_a_person_but_a_kept_person_over_them_is():
    t, h, w = 2, 20, 30
    labels = np.zeros((t, h, w), np.uint16)
    labels[:, 5:15, 2:12] = 1  # raw track 0: a person, posed track 0
    labels[:, 5:15, 16:28] = 2  # raw track 1: the bench, rejected
    prob = np.zeros((t, h, w), np.uint8)
    prob[labels > 0] = 230
    lut = np.array([0, REJECTED_TRACK], np.int32)
    assert (lut_map(labels, lut)[:, 8, 20] == REJECTED_TRACK).all()  # not -1, not a track index
    boxes = np.full((1, t, 4), np.nan, np.float32)
    out = without_rejected(prob, labels, lut, boxes, 0, 0.0, REJECTED_TRACK)
    assert (out[labels == 2] == 0).all() and (out[labels == 1] == 230).all()
    assert (prob[labels == 2] == 230).all()  # the stored array is not changed in place
    # frame 1: the person walks in front of the bench; inside their box the bench's pixels stay
    boxes[0, 1] = (15, 4, 22, 16)
    out = without_rejected(prob, labels, lut, boxes, 0, 0.0, REJECTED_TRACK)
    assert (out[1, 5:15, 16:22] == 230).all() and (out[1, 5:15, 22:28] == 0).all()
    assert (out[0, 5:15, 16:28] == 0).all()
    # nothing rejected: the same array back
    assert without_rejected(prob, labels, np.array([0, 1], np.int32), boxes, 0, 0.0, REJECTED_TRACK) is prob


def test_a_kept_box_that_jumps_for_one_frame_does_not_keep_the_clutter_under_it():
    """``segment.rejected_box_frames`` 3: a kept person's box that jumps over the rejected clutter for
    one frame and back (a followed box that slid for a frame) is its neighbours' box there, so the
    clutter's pixels are not removed in that frame alone (a hole no avatar covers); 1: each frame's
    own box."""
    from anonymask.models.anonymizer.segment.boxes import median_boxes

    t, h, w = 5, 20, 40
    labels = np.zeros((t, h, w), np.uint16)
    labels[:, 5:15, 24:34] = 1  # raw track 0: the person, posed track 0
    labels[:, 5:15, 4:14] = 2  # raw track 1: the clutter beside them, rejected
    prob = np.where(labels > 0, 230, 0).astype(np.uint8)
    lut = np.array([0, REJECTED_TRACK], np.int32)
    boxes = np.full((1, t, 4), np.nan, np.float32)
    boxes[0, :] = (24, 5, 34, 15)
    boxes[0, 2] = (2, 5, 34, 15)  # frame 2 alone: the box reaches over the clutter
    own = without_rejected(prob, labels, lut, median_boxes(boxes, 1), 0, 0.0, REJECTED_TRACK)
    assert (own[2, 5:15, 4:14] == 230).all() and (own[[0, 1, 3, 4], 5:15, 4:14] == 0).all()
    held = without_rejected(prob, labels, lut, median_boxes(boxes, 3), 0, 0.0, REJECTED_TRACK)
    assert (held[:, 5:15, 4:14] == 0).all() and (held[labels == 1] == 230).all()
    # a box that moves over the clutter for good keeps it from that frame on (the next frame agrees)
    boxes[0, 2:] = (2, 5, 34, 15)
    moved = without_rejected(prob, labels, lut, median_boxes(boxes, 3), 0, 0.0, REJECTED_TRACK)
    assert (moved[:2, 5:15, 4:14] == 0).all() and (moved[2:, 5:15, 4:14] == 230).all()
    # no box in a frame stays no box
    boxes[0, 0] = np.nan
    assert np.isnan(median_boxes(boxes, 3)[0, 0]).all()
