"""pose4d paints people found later block by block; the arrays are the same as frame by frame."""

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

from anonymask.models.anonymizer.pose.discover import paint
from anonymask.models.anonymizer.pose.people import Detection
from anonymask.tasks.pose4d import _BlockPainter

T, H, W = 100, 24, 32


def _detection(rng, h=H, w=W) -> Detection:
    x0, y0 = int(rng.integers(0, w - 8)), int(rng.integers(0, h - 8))
    x1, y1 = x0 + int(rng.integers(4, 9)), y0 + int(rng.integers(4, 9))
    mask = rng.random((y1 - y0, x1 - x0)).astype(np.float32)
    z = np.zeros((33, 2), np.float32)
    return Detection(np.array([x0, y0, x1, y1], np.float32), z, np.zeros(33, np.float32), np.zeros((33, 3), np.float32),
                     mask, (x0, y0, x1, y1), 1.0, "face")


def test_block_painting_gives_the_arrays_of_frame_by_frame_painting(tmp_path):
    rng = np.random.default_rng(0)
    g = zarr.open_group(str(tmp_path / "p.zarr"), mode="w")
    labels = g.create_array("lab", shape=(T, H, W), dtype=np.uint16, chunks=(16, H, W), shards=(32, H, W),
                            compressors=ZstdCodec(level=3))
    prob = g.create_array("prob", shape=(T, H, W), dtype=np.uint8, chunks=(16, H, W), shards=(32, H, W),
                          compressors=ZstdCodec(level=3))
    lab0 = rng.integers(0, 4, (T, H, W)).astype(np.uint16)
    p0 = rng.integers(0, 256, (T, H, W)).astype(np.uint8)
    labels[:60], prob[:60] = lab0[:60], p0[:60]  # frames 60.. are written later, as discovery goes on
    ref_lab, ref_p = lab0.copy(), p0.copy()
    ref_lab[60:], ref_p[60:] = 0, 0
    painter = _BlockPainter(labels, prob)
    assert painter.block == 32

    def reference(t, d, tid):  # the stage's former frame-by-frame painting
        p = ref_p[t].astype(np.float32) / 255.0
        paint(ref_lab[t], p, d, tid)
        ref_p[t] = np.clip(np.rint(p * 255), 0, 255).astype(np.uint8)

    # frames in and across blocks, revisited, and one painted before its window is written
    for t in (5, 40, 6, 5, 70, 41, 33):
        d, tid = _detection(rng), int(rng.integers(0, 6))
        painter.paint(t, d, tid)
        reference(t, d, tid)
    painter.flush()  # what write_window does before writing
    labels[60:], prob[60:] = lab0[60:], p0[60:]
    ref_lab[60:], ref_p[60:] = lab0[60:], p0[60:]
    for t in (99, 70, 64, 2):
        d, tid = _detection(rng), int(rng.integers(0, 6))
        painter.paint(t, d, tid)
        reference(t, d, tid)
    painter.flush()
    assert np.array_equal(np.asarray(labels[:]), ref_lab)
    assert np.array_equal(np.asarray(prob[:]), ref_p)
    assert not np.array_equal(ref_lab, lab0)  # the paints changed something


def test_a_relabel_moves_one_raw_ids_pixels_of_one_frame(tmp_path):
    """A track split after discovery (models/anonymizer/pose/second_detector.py): its moved frames'
    pixels take the new id, in those frames only, and the prob array is untouched."""
    rng = np.random.default_rng(1)
    g = zarr.open_group(str(tmp_path / "p.zarr"), mode="w")
    labels = g.create_array("lab", shape=(T, H, W), dtype=np.uint16, chunks=(16, H, W), shards=(32, H, W))
    prob = g.create_array("prob", shape=(T, H, W), dtype=np.uint8, chunks=(16, H, W), shards=(32, H, W))
    lab0 = rng.integers(0, 4, (T, H, W)).astype(np.uint16)
    p0 = rng.integers(0, 256, (T, H, W)).astype(np.uint8)
    labels[:], prob[:] = lab0, p0
    painter = _BlockPainter(labels, prob)
    for t in (10, 50, 11):  # raw id 1 (label 2) -> raw id 6 (label 7) in these frames, across blocks
        painter.relabel(t, 1, 6)
    painter.flush()
    want = lab0.copy()
    for t in (10, 11, 50):
        want[t][want[t] == 2] = 7
    assert np.array_equal(np.asarray(labels[:]), want)
    assert np.array_equal(np.asarray(prob[:]), p0)
    assert (want == 7).sum() == sum((lab0[t] == 2).sum() for t in (10, 11, 50)) > 0
