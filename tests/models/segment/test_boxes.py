import numpy as np

from anonymask.models.anonymizer.segment.boxes import box_masks, box_of


def test_box_covers_silhouette_and_detection_with_margin():
    sil = np.zeros((2, 1, 40, 40), bool)
    sil[0, 0, 10:20, 10:14] = True  # frame 1: nothing rendered
    det = np.full((1, 2, 4), np.nan, np.float32)
    det[0, 1] = [30, 30, 34, 38]
    m = box_masks((2, 40, 40), sil, det, margin=0.25)
    assert m[0, 10:20, 10:14].all()
    assert box_of(m[0]).tolist() == [9, 7, 15, 23]  # 4x10 box grown by 1 and 2.5 px per side
    assert m[1, 30:38, 30:34].all() and not m[1, :20].any()
    assert not box_masks((2, 40, 40), np.zeros((2, 1, 40, 40), bool), None).any()
