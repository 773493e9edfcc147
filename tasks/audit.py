"""Stage ``audit``: an independent detector scans the final video (privacy invariant 10).

Face and body detectors that differ from the one that found the people (models/anonymizer/audit) run on every
``every``-th frame of ``anonymized``; a face or body found mostly outside the avatar pixels
(``render/mask``) in several audited frames fails the video with an :class:`AuditError` that names
the frames; with ``refind`` it must also be found again once the avatars are taken out (a real
person beside an avatar does not need its pixels to be seen). Metrics: ``audit_frames``,
``audit_detections``, ``audit_on_avatars``, ``audit_on_fill`` (mostly on the pixels the inpainting
made up, inpaint's ``fill_made_up``: drawn pixels too, with ``made_up_fill``), ``audit_avatar_induced``,
``audit_not_in_source`` (candidates on the source frame's own pixels that the detector does not
find on the source frame: ``source_check``; up to 20 of them in ``audit_source_excused``, to look
at), ``audit_findings`` and ``audit_passed``. On synthetic data (ground truth in the store) the
ground-truth leak check runs too (models/anonymizer/audit/ground_truth.py): ``audit_gt_leak`` (the real-leak
share; hole pixels whose fill is the same without the person are not counted, ``audit_gt_coincident``
is their share, ``gt_strict`` counts them) fails the video above ``max_gt_leak``;
``audit_detector_findings`` keeps what the detectors
alone said, so their recall can be measured against it.
"""

from __future__ import annotations

import numpy as np

from anonymask.config.stages import AuditSettings
from anonymask.core.errors import AuditError
from anonymask.models.anonymizer.compose.reintegrate import avatar_band
from anonymask.storage.store import CLIP_FRAMES, StageWriter, VideoEntry
from anonymask.tasks.inpaint import COINCIDENT_TOL


def _inpaint_output(entry: VideoEntry, name: str):
    """The inpaint stage's array ``name`` when its record lists it and it is there, else None (a
    store written before the array existed, or a run that skipped it)."""
    rec = entry.record("inpaint") or {}
    return entry.array(name) if name in rec.get("outputs", {}) and entry.has_array(name) else None


def _sampled(entry: VideoEntry, every: int, made_up: bool, source: bool = True):
    """The audited frames (every ``every``-th and the last), chunk by chunk, as
    :class:`~anonymask.models.anonymizer.audit.detectors.AuditedFrame` items; with ``source`` the
    source frame and the hole too (the audit's ``source_check``), where the store has them."""
    from anonymask.models.anonymizer.audit.detectors import AuditedFrame

    anon, avatar = entry.array("anonymized"), entry.array("render/mask")
    bg = entry.array("inpainted") if entry.has_array("inpainted") else None
    made = _inpaint_output(entry, "fill_made_up") if made_up else None
    has_source = source and entry.has_array("raw") and entry.has_array("person_hole")
    raw, hole = (entry.array("raw"), entry.array("person_hole")) if has_source else (None, None)
    t_len = anon.shape[0]

    def chunk(arr, sl, dtype=None):
        if arr is None:
            return None
        a = np.asarray(arr[sl])
        return a.astype(dtype) if dtype is not None else a

    for t0 in range(0, t_len, CLIP_FRAMES):  # one chunk at a time
        sl = slice(t0, t0 + CLIP_FRAMES)
        frames, masks = chunk(anon, sl), chunk(avatar, sl, bool)
        empty, fill = chunk(bg, sl), chunk(made, sl, bool)
        src, filled = chunk(raw, sl), chunk(hole, sl, bool)
        for k in range(len(frames)):
            t = t0 + k
            if t % every == 0 or t == t_len - 1:
                yield AuditedFrame(t, frames[k], masks[k], *(x[k] if x is not None else None
                                                             for x in (empty, fill, src, filled)))


def _hole_chunks(entry: VideoEntry):
    hole, avatar = entry.array("person_hole"), entry.array("render/mask")
    for t0 in range(0, hole.shape[0], CLIP_FRAMES):
        sl = slice(t0, t0 + CLIP_FRAMES)
        yield t0, np.asarray(hole[sl]), np.asarray(avatar[sl])


def _gt_chunks(entry: VideoEntry):
    raw, out, gt, syn = (entry.array(k) for k in ("raw", "anonymized", "gt/person_mask", "render/mask"))
    same = _inpaint_output(entry, "fill_coincident")
    has_fill = same is not None
    fill = entry.array("inpainted") if has_fill else None
    bg = entry.read("gt/background")
    for t0 in range(0, raw.shape[0], CLIP_FRAMES):
        sl = slice(t0, t0 + CLIP_FRAMES)
        o = np.asarray(out[sl])
        excused = None
        if has_fill:  # a fill the person did not cause, where the output shows that fill
            shows_fill = np.abs(o.astype(np.int16) - np.asarray(fill[sl])).max(-1) <= COINCIDENT_TOL
            excused = np.asarray(same[sl], bool) & shows_fill
        yield t0, np.asarray(raw[sl]), o, np.asarray(gt[sl]), bg, avatar_band(np.asarray(syn[sl])), excused


def detector_audit(entry: VideoEntry, cfg: AuditSettings, auditors: list):
    """The detectors' part of the audit over the video's audited frames, with the stage's settings
    (an ``AuditReport``; the quality script calls it too)."""
    from anonymask.models.anonymizer.audit import audit_frames

    return audit_frames(_sampled(entry, cfg.every, cfg.made_up_fill, cfg.source_check), auditors,
                        min_outside=cfg.min_outside, min_frames={"face": cfg.min_face_frames, "body": cfg.min_body_frames},
                        refind=cfg.refind, refind_iou=cfg.refind_iou, source_check=cfg.source_check,
                        source_max_fill=cfg.source_max_fill, source_cover=cfg.source_cover)


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: AuditSettings, w: StageWriter) -> None:
    from anonymask.core.registry import get_backend
    from anonymask.models.anonymizer.audit import gt_leak
    from anonymask.models.anonymizer.audit.erased import scan_erased
    from anonymask.models.anonymizer.audit.margin import audit_margin

    auditors = [get_backend("audit", name).create(cfg.detector_options.get(name)) for name in cfg.detectors]
    rep = detector_audit(entry, cfg, auditors)
    detector_findings = len(rep.findings)
    w.metric(audit_frames=rep.frames_checked, audit_detections=rep.detections, audit_on_avatars=rep.on_avatars,
             audit_unconfirmed=rep.unconfirmed, audit_avatar_induced=rep.avatar_induced, audit_on_fill=rep.on_fill,
             audit_not_in_source=rep.not_in_source, audit_detector_findings=detector_findings)
    if rep.source_excused:  # to look at: what the source check let go
        w.metric(audit_source_excused=rep.source_excused[:20])
    gt = erased = None
    if cfg.ground_truth and entry.has_array("gt/person_mask") and entry.has_array("gt/background"):
        share, finding, coincident = gt_leak(_gt_chunks(entry), max_leak=cfg.max_gt_leak, strict=cfg.gt_strict)
        gt = (share, cfg.max_gt_leak)
        w.metric(audit_gt_leak=share, audit_gt_failed=float(finding is not None), audit_gt_coincident=coincident)
        if finding is not None:
            rep.findings.append(finding)
    if cfg.erased and entry.has_array("person_hole"):
        scan = scan_erased(_hole_chunks(entry))
        finding = scan.finding(cfg.erased_min_share)
        w.metric(audit_erased_frames=len(finding.frames) if finding else 0, audit_erased_largest=scan.largest())
        erased = (scan.largest(), cfg.erased_min_share)
        if finding is not None:
            rep.findings.append(finding)
    # how far from the other verdict, in the record of a failed audit too (status shows both)
    w.metric(**audit_margin(detector_frames=rep.max_frames, frames_needed=rep.frames_needed, gt=gt,
                            erased=erased).metrics())
    w.metric(audit_findings=len(rep.findings), audit_passed=float(rep.passed))
    if rep.findings:
        w.metric(audit_report=[f.__dict__ for f in rep.findings])
        if cfg.fail:
            raise AuditError(f"{entry.video_id}: {rep.summary()}")
