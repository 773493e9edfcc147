"""Skeleton anonymizer job: store export and the flow end to end (tiny epochs)."""

import json

import numpy as np

from anonymask.models.anonymizer.skeleton.anonymizers import load_anonymizer
from anonymask.models.anonymizer.skeleton.export import export_skeletons
from anonymask.models.shared.body.model import get_body_model
from anonymask.models.shared.body.tracks import Camera, SMPLHTrack, upright_orient
from anonymask.models.shared.body.tracks_io import write_tracks
from anonymask.storage.store import DatasetStore, VideoInfo


def test_export_from_store_tracks(tmp_path):
    s = DatasetStore.create(str(tmp_path / "s.zarr"), "synthetic", overwrite=True)
    s.register_videos([VideoInfo("a", label=1), VideoInfo("b", label=0)])
    body = get_body_model()
    for vid, subj in (("a", [3, 5]), ("b", [7])):
        e = s.video(vid)
        tracks = []
        for j in range(len(subj)):
            tr = SMPLHTrack.rest(j, 12)
            tr.global_orient[:] = upright_orient(0.0)
            tr.transl[:] = body.transl_for(tr.betas, [j * 1.0, 0.0, 4.0])
            tracks.append(tr)
        with e.stage("ingest", backend="x") as w:
            write_tracks(w, "gt/pose", tracks, Camera.from_fov(64, 48))
        e.update_attrs(subject_ids=subj, genders=["male", "female"][: len(subj)])
    d = export_skeletons(s.url, length=16)
    assert d["sequences"].shape == (3, 16, 22, 3)
    assert sorted(d["subjects"].tolist()) == [3, 5, 7]
    assert sorted(d["actions"].tolist()) == [0, 1, 1]
    # joints are the posed body's: pelvis where the track put it
    assert np.allclose(d["sequences"][d["subjects"] == 5][0, :, 0, 0], 1.0, atol=1e-4)


def test_flow_writes_results_and_a_loadable_anonymizer(prefect_api, tmp_path):
    from anonymask.flows.skeleton import train_skeleton_anon

    res = train_skeleton_anon(dataset="toy", source="toy", out=str(tmp_path / "run"), length=16,
                              alphas="1", betas="10", epochs=1, adv_epochs=1)
    out = tmp_path / "run"
    rows = json.loads((out / "results.json").read_text())
    methods = {r["method"] for r in rows}
    assert {"original", "adversarial"} <= methods
    assert (out / "tradeoff.png").stat().st_size > 1000
    model, meta = load_anonymizer(out / "anonymizer_best.pt")
    assert meta["config"]["num_joints"] == 25  # the toy test bed is NTU-shaped
    assert res["best"]["method"] in methods
