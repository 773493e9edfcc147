"""Stage ``reintegrate``: refined tubelets pasted over x_dot with the feathered person masks ->
``anonymized`` (x_tilde) and ``public_mask`` (r: pixels that are entirely synthetic).

Records ``person_leak`` on synthetic data: the fraction of ground-truth person pixels whose real
appearance is still visible (target 0), and ``real_leak``: the same, not counting pixels under an
avatar or within 2 px of one (an avatar pixel, or the resampled avatar crop bleeding into the
background, whose colour happens to match the person's is not a leak).
"""

from __future__ import annotations

import numpy as np

from anonymask.config.stages import ReintegrateSettings
from anonymask.models.anonymizer.compose.reintegrate import avatar_band
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import read_window, span_window
from anonymask.storage.windows import frame_windows
from anonymask.tasks.tubelets import alpha_spans, track_alphas, tubelet_ids, tubelet_spans


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: ReintegrateSettings, w: StageWriter) -> None:
    """Per frame, so window by window: memory is one window whatever the video's length."""
    from anonymask.models.anonymizer.compose.reintegrate import public_mask, reintegrate
    from anonymask.models.anonymizer.metrics import person_leak_counts

    x_dot = entry.array("inpainted")
    t_len, h, wd = (int(x) for x in x_dot.shape[:3])
    ids = tubelet_ids(entry)
    crops = [entry.array(f"tubelets/{j}/refined") for j in ids]
    boxes = [entry.read(f"tubelets/{j}/box") for j in ids]
    spans = tubelet_spans(entry) if ids else None
    a_spans = alpha_spans(entry) if ids else None
    size = int(crops[0].shape[1]) if crops else None
    gt = entry.has_array("gt/person_mask")
    bg = entry.read("gt/background") if gt else None
    public_px = 0
    leaked = real = distinguishable = 0
    with w.frames("anonymized", (h, wd, 3), np.uint8, t_len) as out_x, \
            w.frames("public_mask", (h, wd), bool, t_len) as out_r:
        for win in frame_windows(t_len, cfg.window):
            xd = np.asarray(x_dot[win.core])
            # the avatars' silhouettes, read once: for the alphas and for the public mask
            s = read_window(entry, "render/track_masks", win.core_start, win.core_stop, set(ids),
                            spans=a_spans["render/track_masks"]) if ids else {}
            alphas_all = track_alphas(entry, win.core, tracks=set(ids), sil=s, spans=a_spans) if ids else {}
            # the tubelets with pixels in this window (the others change nothing here)
            here = [k for k, j in enumerate(ids) if j in alphas_all]
            if here:
                alphas = [alphas_all[ids[k]] for k in here]
                a0, a1 = win.core_start, win.core_stop
                c = [span_window(crops[k], spans[ids[k]], a0, a1) for k in here]
                b = [span_window(boxes[k], spans[ids[k]], a0, a1, edge=True) for k in here]
                for k, al in zip(here, alphas):  # a tubelet holds every frame its person has a pixel in
                    s0, s1 = (int(x) - a0 for x in spans[ids[k]])
                    if al[: max(0, s0)].any() or al[max(0, s1) :].any():
                        raise ValueError(f"tubelet {ids[k]} (frames {s0 + a0}..{s1 + a0 - 1}) "
                                         f"misses its person's pixels in frames {a0}..{a1 - 1}")
                x_tilde = reintegrate(xd, c, b, alphas, alpha_scale=255)
                none = np.zeros(xd.shape[:3], bool)
                r = public_mask([s.get(ids[k], none) for k in here], alphas=alphas, boxes=b, crop_size=size,
                                alpha_scale=255)
                del alphas, c, s
            else:
                x_tilde, r = xd.copy(), np.zeros(xd.shape[:3], bool)
            out_x.write(x_tilde)
            out_r.write(r)
            public_px += int(np.count_nonzero(r))
            if gt:
                raw, person = entry.read("raw", win.core), entry.read("gt/person_mask", win.core)
                lk, n = person_leak_counts(raw, x_tilde, person, bg)
                rl, _ = person_leak_counts(raw, x_tilde, person, bg,
                                           synthetic=avatar_band(entry.read("render/mask", win.core)))
                leaked += lk
                real += rl
                distinguishable += n
    w.metric(public_fraction=public_px / float(max(t_len * h * wd, 1)))
    if gt:
        w.metric(person_leak=leaked / distinguishable if distinguishable else float("nan"),
                 real_leak=real / distinguishable if distinguishable else float("nan"))
