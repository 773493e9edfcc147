"""The Render variant's public mask is the exact render mask; the final video's is public_mask."""

import numpy as np

from anonymask.models.training.action.clips import ClipDataset
from anonymask.storage.store import DatasetStore, VideoInfo


def test_render_variant_uses_render_mask(tmp_path):
    url = str(tmp_path / "s.zarr")
    s = DatasetStore.create(url, "demo", overwrite=True)
    s.register_videos([VideoInfo("v", label=0, split={"xsub": "train"})])
    e = s.video("v")
    t, h, w = 8, 16, 16
    render = np.zeros((t, h, w), bool)
    render[:, 2:12, 2:12] = True
    final = np.zeros((t, h, w), bool)
    final[:, 4:10, 4:10] = True  # the conservative r of the reintegrated video
    vid = np.zeros((t, h, w, 3), np.uint8)
    with e.stage("x", backend="x") as wr:
        for name in ("merged", "anonymized"):
            wr.write(name, vid)
        wr.write("render/mask", render)
        wr.write("public_mask", final)
    kw = dict(clip_len=4, frame_stride=1, size=(h, w), normalize=False)
    ren = ClipDataset(url, "xsub", "train", variant="render", mask_source="r", **kw)[0]["pixel_public"]
    fin = ClipDataset(url, "xsub", "train", variant="rend_diff", mask_source="r", **kw)[0]["pixel_public"]
    assert np.asarray(ren).sum() == 4 * 100 and np.asarray(fin).sum() == 4 * 36
