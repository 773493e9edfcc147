"""scripts/footage_variants.py pm1: the issue's +-1 grey-level noise, exactly. A yuv420p file (even at
qp 0) moved the decoded samples by up to 14 grey levels (docs/RESULTS.md, 2026-11-28 07:45)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "footage_variants.py"


def test_pm1_decodes_to_the_source_plus_minus_one_exactly(tiny_dataset, tmp_path):
    from anonymask.storage.video_io import read_frames

    doc = json.loads((Path(tiny_dataset) / "dataset.json").read_text())
    vid = doc["videos"][0]["video_id"]
    subprocess.run([sys.executable, str(SCRIPT), str(tiny_dataset), str(tmp_path / "pm1"), "pm1", vid],
                   check=True, capture_output=True)
    src = read_frames(Path(tiny_dataset) / doc["videos"][0]["path"]).astype(np.int16)
    out = read_frames(tmp_path / "pm1" / "videos" / f"{vid}_pm1.mp4").astype(np.int16)
    diff = out - src
    assert out.shape == src.shape
    assert diff.min() >= -1 and diff.max() <= 1
    assert 0.5 < float((diff != 0).mean()) < 0.8  # two thirds of the samples moved, as drawn
    written = json.loads((tmp_path / "pm1" / "dataset.json").read_text())
    assert [v["video_id"] for v in written["videos"]] == [f"{vid}_pm1"]
