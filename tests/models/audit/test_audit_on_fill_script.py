"""scripts/audit_on_fill.py: it lists a real face only where the made-up pixels excuse it, and runs
end to end on an anonymized store."""

import json
import runpy
import shutil
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "audit_on_fill.py"


def test_a_face_is_listed_only_where_made_up_pixels_excuse_it(carphone):
    from anonymask.models.anonymizer.audit import get_auditor

    mod = runpy.run_path(str(SCRIPT))  # its functions, without running main()
    frame = carphone[0]
    face = get_auditor("face")
    boxes = [b for _, b, _ in face.detect(frame)]
    assert boxes
    on = np.zeros(frame.shape[:2], bool)
    for b in boxes:
        x0, y0, x1, y1 = (int(round(float(v))) for v in b)
        on[y0:y1, x0:x1] = True
    none = np.zeros_like(on)
    listed = mod["excused_detections"]([(0, frame, none, on)], [face], 0.6)
    assert listed and all(d["kind"] == "face" and d["outside_drawn"] < 0.6 <= d["outside_avatars"] for d in listed)
    assert mod["excused_detections"]([(0, frame, none, none)], [face], 0.6) == []  # a real face: not excused
    assert mod["excused_detections"]([(0, frame, on, on)], [face], 0.6) == []  # on an avatar: not the fill's
    assert mod["excused_detections"]([(0, frame, none, None)], [face], 0.6) == []  # no map: nothing excused


def test_the_script_runs_on_an_anonymized_store(tiny_anonymized, tmp_path, capsys):
    url = str(tmp_path / "c.zarr")
    shutil.copytree(tiny_anonymized, url)
    mod = runpy.run_path(str(SCRIPT))
    assert mod["main"]([url, "--out", str(tmp_path / "sheets")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    from anonymask.storage.store import DatasetStore

    assert sorted(r["video"] for r in rows) == sorted(DatasetStore.open(url).video_ids())
    assert all(isinstance(r["on_fill"], list) for r in rows)
