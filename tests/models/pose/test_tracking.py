"""Person boxes from a probability video, linked into tracks with stable identities."""

import numpy as np

from anonymask.models.pose.tracking import frame_boxes, iou, link_tracks


def _blob_video(t_len=8, h=120, w=160, drop=(4, 1)):
    """Two soft rectangular 'people' walking towards each other (never touching).

    Person A (larger) moves right, person B moves left; B vanishes in frame drop[0]
    (drop[1] is its index) - a one-frame segmentation dropout.
    """
    prob = np.zeros((t_len, h, w), np.float32)
    truth = np.full((2, t_len, 4), np.nan, np.float32)
    for t in range(t_len):
        for k, (x0, y0, bw, bh, vx) in enumerate(((10, 20, 30, 70, 3), (120, 30, 24, 60, -3))):
            if (t, k) == drop:
                continue
            x = x0 + vx * t
            prob[t, y0:y0 + bh, x:x + bw] = 0.9
            truth[k, t] = (x, y0, x + bw, y0 + bh)
    return prob, truth


def test_frame_boxes_finds_each_region():
    prob, truth = _blob_video()
    boxes = frame_boxes(prob[0])
    assert len(boxes) == 2
    matched = sorted(boxes.tolist(), key=lambda b: b[0])
    for got, want in zip(matched, truth[:, 0]):
        assert iou(np.asarray(got), want) > 0.95
    assert len(frame_boxes(np.zeros((50, 50), np.float32))) == 0
    # a speck below the minimum area is not a person
    speck = np.zeros((100, 100), np.float32)
    speck[5:7, 5:7] = 1.0
    assert len(frame_boxes(speck)) == 0


def test_two_blobs_two_stable_tracks_dropout_bridged():
    prob, truth = _blob_video()
    tracks = link_tracks([frame_boxes(p) for p in prob])
    assert tracks.shape == (2, 8, 4)
    # track 0 is the main actor: seen in every frame (A); track 1 is B with its dropout
    for k in range(2):
        seen = np.isfinite(tracks[k, :, 0])
        np.testing.assert_array_equal(seen, np.isfinite(truth[k, :, 0]))
        for t in np.flatnonzero(seen):
            assert iou(tracks[k, t], truth[k, t]) > 0.9, (k, t)
    # the dropout did not split B into two tracks: frames 3 and 5 belong to the same track
    assert np.isfinite(tracks[1, 3, 0]) and np.isnan(tracks[1, 4, 0]) and np.isfinite(tracks[1, 5, 0])


def test_flicker_false_positive_dropped():
    prob, _ = _blob_video()
    prob[2, 100:115, 70:85] = 1.0  # a one-frame blob far from both people
    tracks = link_tracks([frame_boxes(p) for p in prob], min_length=2)
    assert len(tracks) == 2
