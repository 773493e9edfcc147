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
