"""Stage ``inpaint``: remove every person (the grown mask q) -> ``inpainted`` (x_dot), streamed over
windows of frames. Records ``background_psnr_db`` on the ground-truth person pixels vs the clean
background.

Memory is one window of ``window`` (64) frames plus ``context`` (16) either side, and (temporal
median) a sample of ``sample_frames`` (96) frames spread over the video, whatever its length;
``inpainted`` is written shard by shard. A video of at most ``window + 2 * context`` frames is one
window (the median over the whole video); see models/anonymizer/inpaint/backends.py for longer ones.
A video with cuts is inpainted shot by shot (``shots``, from ingest): a hole is never filled
from another scene. A backend that needs a still camera (the temporal median) is replaced, in a
shot whose view moves (models/shared/shots.py ``camera_drift`` above ``camera_drift``, measured on 8
frames spread over the shot, the people's pixels left out), by ``moving_camera`` (default ``aligned_median``:
each frame filled from its neighbours aligned onto it, models/anonymizer/inpaint/aligned.py): a median over a
moving view is a smear of other places. Metric ``moving_shots``.

With ground truth (synthetic data) the same backend also fills the same holes of the video with
its people replaced by the clean background, and ``fill_coincident`` (T,H,W) bool marks the hole
pixels whose fill is the same (within ``COINCIDENT_TOL`` grey levels) either way: a fill the person
did not cause. A spatial fill can match a person's colour by chance (a grey floor next to grey
trousers) without ever seeing them; the audit's ground-truth check does not count those pixels as
a person shown (models/anonymizer/audit/ground_truth.py). Metric ``fill_coincident_share`` (of hole pixels).
``person_free_check: false`` skips that second fill (the audit then counts every such pixel). The
second fill waits for the real one in memory, or, past ``PERSON_FREE_MAX_BYTES`` of frames, in a
temporary file (a 5-minute synthetic video: memory stays bounded and the check still runs).

``fill_made_up`` (T,H,W) bool marks the hole pixels the backend made up: filled spatially because
no frame it may draw from shows that place without a person (models/anonymizer/inpaint/backends.py);
all False from a backend that does not say. The audit counts them as drawn pixels, like the
avatars'. Metric ``made_up_share`` (of hole pixels)."""

from __future__ import annotations

import contextlib

import numpy as np

from anonymask.config.stages import InpaintSettings
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.windows import video_shots

#: grey levels (any channel) within which the fill without the person is the same fill
COINCIDENT_TOL = 3
#: the person-free fill of a shot is held in memory until the real fill reaches it: videos whose
#: frames take more than this wait on disk, in a temporary file, rather than in memory: the
#: scaling runs' long synthetic videos keep the stage's memory bounded
PERSON_FREE_MAX_BYTES = 512 * 2**20


@contextlib.contextmanager
def person_free_buffer(shape: tuple[int, ...]):
    """(T,H,W,3) uint8 frames for the person-free fill: in memory up to ``PERSON_FREE_MAX_BYTES``,
    else a memory-mapped temporary file, removed afterwards."""
    if int(np.prod(shape)) <= PERSON_FREE_MAX_BYTES:
        yield np.zeros(shape, np.uint8)
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="anonymask-person-free-") as tmp:
        buf = np.lib.format.open_memmap(f"{tmp}/fill.npy", mode="w+", dtype=np.uint8, shape=tuple(shape))
        try:
            yield buf
        finally:
            del buf


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: InpaintSettings, w: StageWriter) -> None:
    from anonymask.config.stages import stage_backend
    from anonymask.models.anonymizer.inpaint.backends import get_inpainter, inpaint_stream
    from anonymask.models.shared.shots import camera_drift

    raw, hole = entry.array("raw"), entry.array("person_hole")
    t_len = raw.shape[0]
    has_gt = entry.has_array("gt/background")
    bg = entry.read("gt/background") if has_gt else None
    se = [0.0, 0]

    def read(a, b):
        return np.asarray(raw[a:b]), np.asarray(hole[a:b])

    def read_person_free(a, b):
        """The frames with every true person pixel shown as the clean background."""
        frames, h = read(a, b)
        m = entry.read("gt/person_mask", slice(a, b)).astype(bool)
        frames[m] = np.broadcast_to(bg, frames.shape)[m]
        return frames, h

    coincident_px = [0, 0]
    made_px = [0, 0]

    def write(t0, frames, made_up=None):
        out.write(frames)  # windows arrive in order
        h = np.asarray(hole[t0 : t0 + len(frames)]).astype(bool)
        made = np.zeros(h.shape, bool) if made_up is None else np.asarray(made_up, bool) & h
        made_out.write(made)
        made_px[0] += int(made.sum())
        made_px[1] += int(h.sum())
        if coincident is not None:
            alt = person_free[t0 : t0 + len(frames)]
            same = h & (np.abs(frames.astype(np.int16) - alt).max(-1) <= COINCIDENT_TOL)
            coincident.write(same)
            coincident_px[0] += int(same.sum())
            coincident_px[1] += int(h.sum())
        if has_gt:
            m = entry.read("gt/person_mask", slice(t0, t0 + len(frames))).astype(bool)
            d = frames[m].astype(np.float64) - np.broadcast_to(bg, frames.shape)[m]
            se[0] += float((d**2).sum())
            se[1] += d.size

    backend = stage_backend("inpaint", cfg)
    check = getattr(backend, "still_camera", False) and cfg.moving_camera != "same"
    moving = 0
    check_fill = has_gt and entry.has_array("gt/person_mask") and cfg.person_free_check
    if not check_fill and "fill_coincident" in entry.group:  # a previous run's: it would excuse this run's fill
        del entry.group["fill_coincident"]
    with contextlib.ExitStack() as outs:
        out = outs.enter_context(w.frames("inpainted", raw.shape[1:], np.uint8, t_len))
        made_out = outs.enter_context(w.frames("fill_made_up", raw.shape[1:3], bool, t_len))
        coincident = outs.enter_context(w.frames("fill_coincident", raw.shape[1:3], bool, t_len)) if check_fill else None
        person_free = outs.enter_context(person_free_buffer(tuple(raw.shape))) if check_fill else None
        for a, b in video_shots(entry):
            use = backend
            if check:
                idx = np.unique(np.linspace(a, b - 1, min(8, b - a)).round().astype(int))
                # frame by frame: a zarr fancy-index read of the same frames was 10x slower
                if camera_drift(np.stack([raw[int(t)] for t in idx]),
                                np.stack([hole[int(t)] for t in idx])) > cfg.camera_drift:
                    use, moving = get_inpainter(cfg.moving_camera), moving + 1
            stream = dict(context=cfg.context, sample_frames=cfg.sample_frames)
            if coincident is not None:  # the same backend, windows and holes, on the person-free frames
                inpaint_stream(use, lambda x, y, a=a: read_person_free(a + x, a + y), b - a,
                               lambda t0, frames, _made=None, a=a: person_free.__setitem__(
                                   slice(a + t0, a + t0 + len(frames)), frames),
                               cfg.window, **stream)
            inpaint_stream(use, lambda x, y, a=a: read(a + x, a + y), b - a,
                           lambda t0, frames, made=None, a=a: write(a + t0, frames, made), cfg.window, **stream)
    w.metric(moving_shots=moving)
    if made_px[1]:
        w.metric(made_up_share=made_px[0] / made_px[1])
    if coincident_px[1]:
        w.metric(fill_coincident_share=coincident_px[0] / coincident_px[1])
    if has_gt and se[1]:
        mse = se[0] / se[1]
        w.metric(background_psnr_db=float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse))
