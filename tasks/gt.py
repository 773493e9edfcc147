"""Ground truth of the synthetic data into ``gt/``: masks, background, SMPL-H tracks, joints.

Resized with the video when ingest scales it (masks nearest-neighbour, pixel coordinates and the
camera scaled), so every metric compares like with like.
"""

from __future__ import annotations

import numpy as np

from anonymask.models.shared.body.tracks import Camera, SMPLHTrack
from anonymask.models.shared.body.tracks_io import write_tracks
from anonymask.storage.store import StageWriter, VideoEntry


def ingest_ground_truth(entry: VideoEntry, gt_path: str, w: StageWriter, frames: int,
                        source_hw: tuple[int, int], hw: tuple[int, int]) -> None:
    from anonymask.models.shared.frames import resize_video

    with np.load(gt_path, allow_pickle=False) as z:
        gt = {k: z[k] for k in z.files}
    scale = hw[0] / float(source_hw[0])
    mask = gt["mask"][:frames]
    w.write("gt/person_mask", resize_video(mask.astype(np.uint8), hw, nearest=True).astype(bool))
    bg = resize_video(gt["background"][None], hw)[0]
    w.write("gt/background", bg, frame_chunked=False)
    w.write("gt/joints2d", (gt["joints2d"][:frames] * scale).astype(np.float32), frame_chunked=False)
    w.write("gt/joints3d", gt["joints3d"][:frames].astype(np.float32), frame_chunked=False)
    camera = Camera.from_array(gt["camera"])
    if scale != 1.0:
        camera = camera.scaled(scale)
    tracks = []
    for n in range(gt["betas"].shape[0]):
        tracks.append(SMPLHTrack(
            n, gt["betas"][n], gt["global_orient"][n, :frames], gt["body_pose"][n, :frames],
            gt["left_hand_pose"][n, :frames], gt["right_hand_pose"][n, :frames], gt["transl"][n, :frames],
            gt["valid"][n, :frames], gender=str(gt["genders"][n]),
        ))
    write_tracks(w, "gt/pose", tracks, camera)
    entry.update_attrs(subject_ids=[int(s) for s in gt["subject_ids"]],
                       genders=[str(g) for g in gt["genders"]])
