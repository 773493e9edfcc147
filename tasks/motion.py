"""Stage ``motion`` (optional, off by default): a trained skeleton anonymizer changes each track's
motion so avatars no longer carry the subject's gait. Disabled, it writes nothing and the render
stage reads ``pose/`` unchanged."""

from __future__ import annotations

from anonymask.config.stages import MotionSettings
from anonymask.storage.store import StageWriter, VideoEntry


def motion_prefix(entry: VideoEntry) -> str:
    """Where the render stage reads tracks: ``motion/`` when the stage changed them."""
    from anonymask.models.shared.body.tracks_io import has_tracks

    rec = entry.record("motion") or {}
    return "motion" if rec.get("config", {}).get("enabled") and has_tracks(entry, "motion") else "pose"


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: MotionSettings, w: StageWriter) -> None:
    if not cfg.enabled:
        w.metric(motion_anonymized=False)
        return
    from anonymask.models.anonymizer.skeleton.pipeline_stage import anonymize_tracks
    from anonymask.models.shared.body.tracks_io import read_tracks, write_tracks

    tracks, camera = read_tracks(entry, "pose")
    new_tracks, metrics = anonymize_tracks(tracks, camera, cfg.checkpoint)
    write_tracks(w, "motion", new_tracks, camera)
    w.metric(motion_anonymized=True, **metrics)
