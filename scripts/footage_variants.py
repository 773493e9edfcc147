"""Variants of generated (demo-layout) videos the way users' footage differs, ground truth transformed alike.

python scripts/footage_variants.py SRC_ROOT DST_ROOT KINDS IDS   (KINDS comma-separated; IDS comma-separated or all)
kinds: mirdim (mirrored + dim light, gamma 1.6 x 0.55), crf35 (heavy compression at the source),
sensor (Gaussian sensor noise sigma 4 grey levels), pm1 (uniform integer noise in {-1,0,1}, written
RGB-lossless: every decoded sample is the source's, +-1 exactly).
"""

import json
import sys
from pathlib import Path

import numpy as np

from anonymask.storage.video_io import read_frames as read_video
from anonymask.storage.video_io import write_mp4

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
kinds = sys.argv[3].split(",")
ids = None if sys.argv[4] == "all" else sys.argv[4].split(",")
doc = json.loads((src / "dataset.json").read_text())
(dst / "videos").mkdir(parents=True, exist_ok=True)
(dst / "gt").mkdir(parents=True, exist_ok=True)
out_videos = []
rng = np.random.default_rng(12345)


def dim(x):
    return np.clip(np.rint(255.0 * 0.55 * (x.astype(np.float32) / 255.0) ** 1.6), 0, 255).astype(np.uint8)


for v in doc["videos"]:
    if ids is not None and v["video_id"] not in ids:
        continue
    frames = np.asarray(read_video(src / v["path"]))
    with np.load(src / v["gt"], allow_pickle=False) as z:
        gt = {k: z[k] for k in z.files}
    for kind in kinds:
        f, g = frames.copy(), dict(gt)
        opts = {"crf": 16, "preset": "medium", "options": {"threads": "1"}}
        if kind == "mirdim":
            f = dim(f[:, :, ::-1])
            for k in ("person_masks", "mask", "alpha"):
                g[k] = np.ascontiguousarray(g[k][..., ::-1])
            g["background"] = dim(g["background"][:, ::-1])
            j = g["joints2d"].copy()
            j[..., 0] = g["camera"][4] - 1 - j[..., 0]
            g["joints2d"] = j
        elif kind == "crf35":
            opts["crf"] = 35
        elif kind == "sensor":
            f = np.clip(f.astype(np.float32) + rng.normal(0, 4.0, f.shape), 0, 255).round().astype(np.uint8)
        elif kind == "pm1":
            f = np.clip(f.astype(np.int16) + rng.integers(-1, 2, f.shape), 0, 255).astype(np.uint8)
            # exact: RGB lossless (libx264rgb, qp 0). A yuv420p file, even at qp 0, changes the
            # pixels by more than the noise (chroma subsampling and the colour conversion)
            opts = {"crf": 0, "preset": "medium", "codec": "libx264rgb", "pix_fmt": "rgb24",
                    "options": {"threads": "1", "qp": "0"}}
        vid = f"{v['video_id']}_{kind}"
        write_mp4(dst / "videos" / f"{vid}.mp4", f, doc["fps"], **opts)
        np.savez_compressed(dst / "gt" / f"{vid}.npz", **g)
        out_videos.append({**v, "video_id": vid, "path": f"videos/{vid}.mp4", "gt": f"gt/{vid}.npz"})
doc["videos"] = out_videos
(dst / "dataset.json").write_text(json.dumps(doc, indent=1))
print(len(out_videos), "videos in", dst)
