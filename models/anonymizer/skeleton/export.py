"""Skeleton sequences from a store's pose tracks, for the motion anonymizer and its attackers.

One sequence per (video, track): the 22 SMPL-H body joints of the track's valid frames, resampled
to a fixed length. Identities: the synthetic data records each track's subject and gender in the
video attrs (``subject_ids``, ``genders``); other datasets give one subject per video (info).
"""

from __future__ import annotations

import numpy as np

from anonymask.core.errors import DatasetError
from anonymask.models.shared.body.tracks_io import has_tracks, read_tracks
from anonymask.storage.store import DatasetStore


def export_skeletons(store_url: str, prefix: str = "auto", length: int = 32, min_frames: int = 8) -> dict[str, np.ndarray]:
    """{"sequences" (N,length,22,3), "actions" (N,), "subjects" (N,), "genders" (N,) (-1 unknown), "video_ids"}."""
    from anonymask.models.anonymizer.skeleton.data import to_length
    from anonymask.models.shared.body.model import get_body_model

    store = DatasetStore.open(store_url, mode="r")
    body = get_body_model()
    seqs, actions, subjects, genders, vids = [], [], [], [], []
    for entry in store.videos():
        pre = prefix
        if pre == "auto":
            pre = "gt/pose" if has_tracks(entry, "gt/pose") else "pose"
        if not has_tracks(entry, pre) or entry.info.label is None:
            continue
        tracks, _ = read_tracks(entry, pre)
        sids = entry.attrs.get("subject_ids") or []
        gens = entry.attrs.get("genders") or []
        for j, tr in enumerate(tracks):
            if tr.valid.sum() < min_frames:
                continue
            joints = body.pose_track(tr.slice(tr.valid)).joints[:, :22]
            seqs.append(to_length(joints, length, mode="resample"))
            actions.append(int(entry.info.label))
            subj = sids[j] if j < len(sids) else entry.info.subject
            if subj is None:
                raise DatasetError(f"{store_url}: video {entry.video_id} has no subject id (needed for re-identification)")
            subjects.append(int(str(subj).lstrip("sSpP") or 0) if not isinstance(subj, int) else subj)
            g = gens[j] if j < len(gens) else None
            genders.append({"male": 0, "female": 1}.get(str(g), -1))
            vids.append(f"{entry.video_id}/{j}")
    if not seqs:
        raise DatasetError(f"{store_url}: no pose tracks with labels found (run the anonymize flow first)")
    return {
        "sequences": np.stack(seqs).astype(np.float32),
        "actions": np.asarray(actions, np.int64),
        "subjects": np.asarray(subjects, np.int64),
        "genders": np.asarray(genders, np.int64),
        "video_ids": np.asarray(vids),
    }
