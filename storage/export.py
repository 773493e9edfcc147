"""Anonymized data out of the store: one video file per publishable video, a manifest, a verifier.

``export_store(url, out)`` (``anonymask export STORE --out DIR``, the ``export`` flow) writes:

* ``<rel>.mp4`` per video whose every stage is done, the audit included, at the source's relative
  path under the dataset's source folder (``videos/a.avi`` -> ``videos/a.mp4``; a source outside
  that folder, or two sources that would meet at one name, fall back to ``<video_id>.mp4``).
  H.264 (libx264, yuv420p, ``crf``) by default; ``lossless``: H.264 RGB at qp 0 (libx264rgb),
  which decodes to exactly the stored frames (fewer players open it). Frames are the store's
  ``anonymized`` array **at the ingest size** (``ingest.max_side``; the manifest states ``size``
  and the source's ``source_size``: nothing is scaled back up). fps is the ingested one; the
  source's display rotation is kept as the file's display matrix (frames are turned back to the
  coded orientation, so a player shows them as the source was shown). The source's first audio
  track is copied packet for packet (no re-encode, its priming packets included), aligned to the
  first video frame; with ``ingest.max_frames`` it is cut at the last exported frame.
* ``with_masks="video"``: ``<rel>.mask.mp4``, r (``public_mask``: the synthetic pixels, 255) as a
  lossless H.264 RGB video; ``"png"``: ``<rel>.mask/000000.png ...``. q (the real person's
  silhouette) is never exported: it is derived from the real person.
* ``manifest.jsonl``: a header line (``kind: export``: project and pipeline versions, dataset,
  classes, splits, settings) then one line per video, exported or not (``status`` exported /
  excluded / error with ``reason``), with the source id and path, output path, frames, fps, sizes,
  label, split, the anonymize records (backend, config hash per stage, ``settings_hash``), audit
  metrics and margin, and ``files``: every file written with its bytes and sha256.
* ``README.txt``: what the folder holds and how to check it.

Never exported: a video not done, stale, or whose audit failed (listed with the reason; a file an
earlier export wrote for it is removed). Resumable and idempotent: a video whose manifest line
records the same ``anonymized`` checksum (the store's reintegrate record) and export settings,
with every file present and matching its sha256, is left alone; anything else is rewritten.
Every file is written under a temporary name (``.<name>.<pid>.part``) and renamed into place, the
manifest after each video: a killed export leaves no half file under a final name, and the next
run removes the leftovers and carries on.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import av
import numpy as np

from anonymask import PIPELINE_VERSION, __version__
from anonymask.core.errors import StoreError
from anonymask.storage.hashing import combine_hashes, config_hash, file_checksum
from anonymask.storage.inspect import status_report
from anonymask.storage.runs import json_safe
from anonymask.storage.store import CLIP_FRAMES, STATUS_DONE, DatasetStore, VideoEntry
from anonymask.storage.video_io import Mp4Writer

MANIFEST = "manifest.jsonl"
README = "README.txt"
EXPORT_FORMAT = 1
#: the store array exported, the stage that records its checksum, and the publishing gate
VIDEO_ARRAY = "anonymized"
VIDEO_STAGE = "reintegrate"
MASK_ARRAY = "public_mask"
AUDIT_STAGE = "audit"
MASK_MODES = (None, "video", "png")
#: clockwise display rotation applied at ingest -> np.rot90 k (as storage/video_io.py applies it)
_ROT_K = {0: 0, 90: -1, 180: 2, 270: 1}


@dataclass(frozen=True)
class ExportOptions:
    lossless: bool = False
    with_masks: str | None = None
    crf: int = 18
    preset: str = "medium"

    def __post_init__(self):
        if self.with_masks not in MASK_MODES:
            raise ValueError(f"with_masks must be 'video', 'png' or None (got {self.with_masks!r})")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["codec"] = "libx264rgb" if self.lossless else "libx264"
        if self.lossless:
            d.pop("crf")
        return d

    @property
    def settings_hash(self) -> str:
        return config_hash({"format": EXPORT_FORMAT, **self.to_dict()})


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------ names and gate
def output_names(store: DatasetStore) -> dict[str, str]:
    """video id -> output path (POSIX, relative to the export folder), for every video of the store.

    The source's path relative to the dataset's source folder with the suffix ``.mp4``; a source
    outside it (or none), or names two videos would share, become ``<video_id>.mp4``.
    """
    root = store.attrs.get("source") or ""
    names: dict[str, str] = {}
    for entry in store.videos():
        src = entry.info.path
        rel = None
        if src and root:
            try:
                rel = Path(os.path.abspath(src)).relative_to(os.path.abspath(root))
            except ValueError:
                rel = None
        if rel is None or not rel.parts or any(p in ("..", "") for p in rel.parts):
            names[entry.video_id] = f"{entry.video_id}.mp4"
        else:
            names[entry.video_id] = PurePosixPath(*rel.parts).with_suffix(".mp4").as_posix()
    seen: dict[str, list[str]] = {}
    for vid, name in names.items():
        seen.setdefault(name.lower(), []).append(vid)
    for vids in seen.values():
        if len(vids) > 1:
            for vid in vids:
                names[vid] = f"{vid}.mp4"
    return names


def exclusion_reason(entry: VideoEntry, row: dict[str, Any], stages: list[str]) -> str | None:
    """Why this video may not be published (None: every stage done, the audit passed)."""
    recs = entry.records()
    audit = recs.get(AUDIT_STAGE)
    if audit is not None and audit.get("status") == "failed":
        return f"audit failed: {audit.get('error') or 'no reason recorded'}"
    for st in stages:
        rec = recs.get(st)
        status = (rec or {}).get("status", "missing")
        if status != STATUS_DONE:
            why = (rec or {}).get("error") or (rec or {}).get("stale_reason")
            return f"not done: stage {st} is {status}" + (f" ({why})" if why else "")
    if audit is None or audit.get("status") != STATUS_DONE:
        return "not done: the audit has not run"
    if row.get("status") != STATUS_DONE:
        return f"not done: status {row.get('status')}"
    if VIDEO_ARRAY not in (recs.get(VIDEO_STAGE) or {}).get("outputs", {}) or not entry.has_array(VIDEO_ARRAY):
        return f"no {VIDEO_ARRAY!r} array recorded by {VIDEO_STAGE}"
    return None


# ------------------------------------------------------------------------------ manifest
def read_manifest(out: str | Path) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """(header, {video_id: line}) of an export folder; (None, {}) when there is no manifest."""
    path = Path(out) / MANIFEST
    if not path.exists():
        return None, {}
    header, videos = None, {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise StoreError(f"{path}: line {n} is not JSON ({e})") from None
        if d.get("kind") == "export":
            header = d
        elif d.get("kind") == "video" and d.get("video_id"):
            videos[d["video_id"]] = d
    return header, videos


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_manifest(out: Path, header: dict[str, Any], videos: dict[str, dict[str, Any]]) -> None:
    lines = [json.dumps(json_safe(header), sort_keys=True)]
    lines += [json.dumps(json_safe(videos[k]), sort_keys=True) for k in sorted(videos)]
    _write_if_changed(out / MANIFEST, "\n".join(lines) + "\n")


def _write_if_changed(path: Path, text: str) -> None:
    """A rerun that changes nothing leaves the file (and its mtime) alone."""
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    _atomic_text(path, text)


def _header(store: DatasetStore, opts: ExportOptions) -> dict[str, Any]:
    attrs = store.attrs
    return {
        "kind": "export",
        "export_format": EXPORT_FORMAT,
        "project_version": __version__,
        "pipeline_version": attrs.get("pipeline_version", PIPELINE_VERSION),
        "dataset": store.dataset,
        "store": store.url,
        "source": attrs.get("source"),
        "classes": store.classes,
        "splits": attrs.get("splits", []),
        "settings": opts.to_dict(),
        "settings_hash": opts.settings_hash,
        "exported_at": _now(),
    }


def _anonymize_record(entry: VideoEntry) -> dict[str, Any]:
    recs = entry.records()
    per_stage = {
        st: {k: rec.get(k) for k in ("backend", "config_hash", "input_hash", "finished_at", "seconds",
                                      "pipeline_version")}
        for st, rec in recs.items()
    }
    settings = combine_hashes(*[f"{st}={recs[st].get('config_hash')}" for st in sorted(recs)])
    return {"settings_hash": settings, "stages": per_stage}


def _video_line(store: DatasetStore, entry: VideoEntry, row: dict[str, Any], name: str) -> dict[str, Any]:
    info, attrs = entry.info, entry.attrs
    recs = entry.records()
    audit = (recs.get(AUDIT_STAGE) or {}).get("metrics") or {}
    return {
        "kind": "video",
        "video_id": entry.video_id,
        "source": info.path,
        "source_sha256": attrs.get("source_checksum"),
        "path": name,
        "label": info.label,
        "label_name": info.label_name,
        "split": info.split,
        "subject": info.subject,
        "camera": info.camera,
        "frames": attrs.get("frames"),
        "fps": export_fps(attrs) if attrs.get("fps") else None,
        "size": [attrs.get("height"), attrs.get("width")],
        "size_note": "ingest size (ingest.max_side); the source's size is source_size",
        "source_size": attrs.get("source_size"),
        "rotation": int(attrs.get("rotation") or 0),
        "frame_cap": attrs.get("frame_cap"),
        "source_frames": attrs.get("source_frames"),
        "anonymize": _anonymize_record(entry),
        "audit": {k: v for k, v in audit.items()
                  if k.startswith("audit_") and k not in ("audit_report", "audit_source_excused")},  # counts, not lists
        "audit_margin": row.get("audit_margin"),
        "store_checksum": ((recs.get(VIDEO_STAGE) or {}).get("outputs", {}).get(VIDEO_ARRAY) or {}).get("checksum"),
    }


# ------------------------------------------------------------------------------ writing files
class ExportWriter(Mp4Writer):
    """:class:`Mp4Writer` (temp file, renamed on close) plus a display rotation and the source's
    audio copied packet for packet, interleaved with the video as it is written."""

    def __init__(self, path, fps, *, rotation_ccw: int = 0, audio_from: str | Path | None = None,
                 audio_end_s: float | None = None, **kw):
        super().__init__(path, fps, **kw)
        self.rotation_ccw = int(rotation_ccw) % 360
        self.audio_from = audio_from
        self.audio_end_s = audio_end_s
        self._src = None
        self._audio = None
        self.audio: dict[str, Any] | None = None

    def _start(self, h: int, w: int) -> None:
        super()._start(h, w)
        if self.rotation_ccw:
            self._stream.set_display_rotation(self.rotation_ccw)
        if self.audio_from is None:
            return
        src = av.open(str(self.audio_from))
        self._src = src
        if not src.streams.audio:
            return
        ain = src.streams.audio[0]
        aout = self._container.add_stream_from_template(ain)
        vin = src.streams.video[0] if src.streams.video else None
        v0 = float(vin.start_time * vin.time_base) if vin is not None and vin.start_time is not None else 0.0
        self._audio = {"in": ain, "out": aout, "packets": src.demux(ain), "offset": int(round(v0 / ain.time_base)),
                       "pending": None, "duration": 0, "packets_copied": 0}
        self.audio = {"codec": ain.codec_context.name, "sample_rate": ain.codec_context.sample_rate,
                      "channels": ain.codec_context.channels, "copied": True}

    def _mux_audio(self, until_s: float | None) -> None:
        a = self._audio
        if a is None:
            return
        tb = a["in"].time_base
        while True:
            pkt = a["pending"]
            if pkt is None:
                try:
                    pkt = next(a["packets"])
                except (StopIteration, av.error.EOFError):
                    a["packets"] = iter(())
                    return
                if pkt.dts is None or pkt.size == 0:
                    continue
                pkt.pts = None if pkt.pts is None else pkt.pts - a["offset"]
                pkt.dts = pkt.dts - a["offset"]
            # packets before the first video frame (an encoder's priming samples) are kept: the
            # muxer writes the same edit list the source had
            t = float((pkt.pts if pkt.pts is not None else pkt.dts) * tb)
            if self.audio_end_s is not None and t >= self.audio_end_s:
                a["pending"] = None
                a["packets"] = iter(())
                return
            if until_s is not None and t > until_s:
                a["pending"] = pkt
                return
            a["pending"] = None
            a["duration"] += int(pkt.duration or 0)
            a["packets_copied"] += 1
            pkt.stream = a["out"]
            self._container.mux(pkt)

    def write(self, frames: np.ndarray) -> None:
        super().write(frames)
        self._mux_audio(self.frames_written / float(self.rate))

    def close(self) -> Path:
        try:
            if self._container is not None:
                self._mux_audio(None)
                if self.audio is not None and self._audio is not None:
                    self.audio.update(packets=self._audio["packets_copied"],
                                      duration_s=round(float(self._audio["duration"] * self._audio["in"].time_base), 6))
            return super().close()
        finally:
            self._close_src()

    def abort(self) -> None:
        try:
            super().abort()
        finally:
            self._close_src()

    def _close_src(self) -> None:
        if self._src is not None:
            self._src.close()
            self._src = None


def export_fps(attrs: dict[str, Any]) -> float:
    """The source's stream rate for a constant-rate source (exact, e.g. 30000/1001), else the rate
    ingest measured from the timestamps."""
    declared = attrs.get("fps_declared")
    if declared and not attrs.get("variable_frame_rate"):
        return float(declared)
    return float(attrs["fps"])


def _to_coded(block: np.ndarray, rotation_cw: int) -> np.ndarray:
    """Stored frames are in display orientation (ingest turned them); turn them back."""
    k = _ROT_K.get(int(rotation_cw) % 360, 0)
    return np.ascontiguousarray(np.rot90(block, -k, axes=(1, 2))) if k else block


def _file_entry(out: Path, rel: str) -> dict[str, Any]:
    p = out / rel
    return {"path": rel, "bytes": p.stat().st_size, "sha256": file_checksum(p)}


def _dir_digest(path: Path) -> tuple[str, int, int]:
    """(sha256 over 'name sha256' lines of the sorted files, count, bytes) of a PNG folder."""
    h = hashlib.sha256()
    n = size = 0
    for p in sorted(path.iterdir()):
        if p.is_file():
            h.update(f"{p.name} {file_checksum(p)}\n".encode())
            n += 1
            size += p.stat().st_size
    return h.hexdigest(), n, size


def _has_audio(path: str | None) -> bool:
    if not path or not Path(path).is_file():
        return False
    try:
        with av.open(str(path)) as c:
            return bool(c.streams.audio)
    except av.error.FFmpegError:
        return False


def write_video_files(entry: VideoEntry, out: Path, rel: str, opts: ExportOptions,
                      stop_after: int | None = None) -> dict[str, Any]:
    """Write one video's files (and masks); returns {files, audio}. ``stop_after``: test hook, raise
    after this many frames (a crash in the middle)."""
    attrs = entry.attrs
    fps = export_fps(attrs)
    rot = int(attrs.get("rotation") or 0)
    src = entry.info.path
    audio_from = None
    if _has_audio(src):
        recorded = attrs.get("source_checksum")
        if recorded and file_checksum(src) != recorded:
            raise StoreError(f"{src}: the source changed since ingest (sha256 differs): its audio would not match")
        audio_from = src
    frames = entry.array(VIDEO_ARRAY)
    t_len = int(frames.shape[0])
    end_s = t_len / fps if attrs.get("frame_cap") else None
    kw: dict[str, Any] = (
        {"codec": "libx264rgb", "pix_fmt": "rgb24", "crf": 0, "options": {"qp": "0"}, "preset": opts.preset}
        if opts.lossless else {"codec": "libx264", "pix_fmt": "yuv420p", "crf": opts.crf, "preset": opts.preset}
    )
    dst = out / rel
    with ExportWriter(dst, fps, rotation_ccw=(-rot) % 360, audio_from=audio_from, audio_end_s=end_s,
                      odd="error", **kw) as w:
        for t0 in range(0, t_len, CLIP_FRAMES):
            w.write(_to_coded(np.asarray(frames[t0 : t0 + CLIP_FRAMES]), rot))
            if stop_after is not None and w.frames_written >= stop_after:
                raise RuntimeError(f"stopped after {w.frames_written} frames (test hook)")
    audio = w.audio
    files = [_file_entry(out, rel)]
    if opts.with_masks:
        files.append(_write_masks(entry, out, rel, opts.with_masks, fps, rot))
    return {"files": files, "audio": audio, "codec": kw["codec"], "pix_fmt": kw["pix_fmt"]}


def _mask_blocks(entry: VideoEntry):
    arr = entry.array(MASK_ARRAY)
    for t0 in range(0, int(arr.shape[0]), CLIP_FRAMES):
        m = np.asarray(arr[t0 : t0 + CLIP_FRAMES])
        yield np.where(m.astype(bool), np.uint8(255), np.uint8(0))


def _write_masks(entry: VideoEntry, out: Path, rel: str, mode: str, fps: float, rot: int) -> dict[str, Any]:
    stem = rel[: -len(".mp4")]
    if mode == "video":
        mrel = f"{stem}.mask.mp4"
        with ExportWriter(out / mrel, fps, rotation_ccw=(-rot) % 360, codec="libx264rgb", pix_fmt="rgb24",
                          crf=0, options={"qp": "0"}, odd="error") as w:
            for m in _mask_blocks(entry):
                w.write(_to_coded(np.repeat(m[..., None], 3, axis=-1), rot))
        return dict(_file_entry(out, mrel), kind="mask_r")
    import cv2

    mrel = f"{stem}.mask"
    final = out / mrel
    tmp = final.with_name(f".{final.name}.{os.getpid()}.part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    t = 0
    for m in _mask_blocks(entry):  # display orientation: a PNG has no rotation flag
        for img in m:
            if not cv2.imwrite(str(tmp / f"{t:06d}.png"), img):
                raise OSError(f"{tmp}: could not write frame {t}")
            t += 1
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    digest, n, size = _dir_digest(final)
    return {"path": mrel, "kind": "mask_r_png", "files": n, "bytes": size, "sha256": digest}


# ------------------------------------------------------------------------------ checks
def check_file(out: Path, f: dict[str, Any]) -> str | None:
    """None when the file (or PNG folder) matches its manifest entry, else what is wrong."""
    p = out / f["path"]
    if f.get("kind") == "mask_r_png":
        if not p.is_dir():
            return "missing"
        digest, n, _ = _dir_digest(p)
        if n != f.get("files"):
            return f"{n} files, manifest says {f.get('files')}"
        return None if digest == f["sha256"] else "content differs from the manifest (sha256)"
    if not p.is_file():
        return "missing"
    size = p.stat().st_size
    if size != f.get("bytes"):
        return f"{size} bytes, manifest says {f.get('bytes')}"
    return None if file_checksum(p) == f["sha256"] else "content differs from the manifest (sha256)"


def _up_to_date(out: Path, prev: dict[str, Any] | None, want: dict[str, Any]) -> bool:
    if not prev or prev.get("status") != "exported":
        return False
    for k in ("store_checksum", "export_settings_hash", "path", "source_sha256"):
        if prev.get(k) != want.get(k):
            return False
    return bool(prev.get("files")) and all(check_file(out, f) is None for f in prev["files"])


def _remove_files(out: Path, line: dict[str, Any]) -> list[str]:
    gone = []
    for f in line.get("files") or []:
        p = out / f["path"]
        if p.is_dir():
            shutil.rmtree(p)
            gone.append(f["path"])
        elif p.exists():
            p.unlink()
            gone.append(f["path"])
    return gone


def clean_partials(out: Path) -> list[str]:
    """Remove the temporary files of an export that was killed (``.<name>.<pid>.part``)."""
    gone = []
    for p in sorted(out.rglob(".*.part")):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        gone.append(str(p.relative_to(out)))
    return gone


# ------------------------------------------------------------------------------ the export
def export_store(
    url: str,
    out: str | Path,
    options: ExportOptions | None = None,
    videos: Iterable[str] | None = None,
    log: Callable[[str], None] | None = None,
    _stop_after: int | None = None,
) -> dict[str, Any]:
    """Export every publishable video of the store (or ``videos``) into ``out``; see the module doc.

    Returns {"out", "manifest", "written", "unchanged", "excluded": {id: reason},
    "errors": {id: reason}, "removed": [paths], "partials_removed": [paths]}.
    """
    opts = options or ExportOptions()
    log = log or (lambda s: None)
    store = DatasetStore.open(url, mode="r")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise StoreError(f"{out}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    partials = clean_partials(out)
    old_header, old = read_manifest(out)
    if old_header is not None and old_header.get("dataset") != store.dataset:
        raise StoreError(f"{out}: holds an export of dataset {old_header.get('dataset')!r}, not "
                         f"{store.dataset!r} (use another folder)")
    report = status_report(store)
    rows = {r["video_id"]: r for r in report["videos"]}
    names = output_names(store)
    wanted = list(videos) if videos else sorted(rows)
    unknown = [v for v in wanted if v not in rows]
    if unknown:
        raise StoreError(f"{url}: no video(s) {', '.join(unknown)} in the store")
    header = _header(store, opts)
    if old_header is not None and {k: v for k, v in old_header.items() if k != "exported_at"} == {
            k: v for k, v in json_safe(header).items() if k != "exported_at"}:
        header["exported_at"] = old_header.get("exported_at")  # the same export: its date stays
    lines = {k: v for k, v in old.items() if k in rows}
    res: dict[str, Any] = {"out": str(out), "manifest": str(out / MANIFEST), "written": [], "unchanged": [],
                           "excluded": {}, "errors": {}, "removed": [], "partials_removed": partials}
    stages = store.stages
    for vid in wanted:
        entry, row = store.video(vid), rows[vid]
        line = _video_line(store, entry, row, names[vid])
        line["export_settings_hash"] = opts.settings_hash
        prev = old.get(vid)
        reason = exclusion_reason(entry, row, stages)
        if reason is None and prev and prev.get("status") == "exported" and prev.get("path") != line["path"]:
            res["removed"] += _remove_files(out, prev)  # its name changed: the old file goes
        if reason is not None:
            if prev and prev.get("status") == "exported":
                res["removed"] += _remove_files(out, prev)
            lines[vid] = dict(line, status="excluded", reason=reason, files=[])
            res["excluded"][vid] = reason
            log(f"excluded  {vid}: {reason}")
        elif _up_to_date(out, prev, line):
            lines[vid] = dict(prev)
            res["unchanged"].append(vid)
            log(f"unchanged {vid}: {line['path']}")
        else:
            try:
                written = write_video_files(entry, out, line["path"], opts, stop_after=_stop_after)
            except Exception as e:
                if _stop_after is not None:
                    raise
                why = f"{type(e).__name__}: {e}"
                lines[vid] = dict(line, status="error", reason=why, files=[])
                res["errors"][vid] = why
                log(f"ERROR     {vid}: {why}")
            else:
                lines[vid] = dict(line, status="exported", reason=None, exported_at=_now(), **written)
                res["written"].append(vid)
                log(f"written   {vid}: {line['path']}")
        write_manifest(out, header, lines)
    write_manifest(out, header, lines)
    _write_if_changed(out / README, readme_text(header, lines))
    return res


def readme_text(header: dict[str, Any], lines: dict[str, dict[str, Any]]) -> str:
    exported = [v for v in lines.values() if v.get("status") == "exported"]
    other = [v for v in lines.values() if v.get("status") != "exported"]
    s = header["settings"]
    out = [
        f"Anonymized export of dataset {header['dataset']!r} (anonymask {header['project_version']}, "
        f"pipeline {header['pipeline_version']}, {header['exported_at']}).",
        "",
        "Every person filmed was replaced by a synthetic avatar, and an independent detector audited",
        "each video before it was exported. Videos not done or whose audit failed are NOT here; they",
        "are listed in manifest.jsonl with the reason.",
        "",
        f"Files: {len(exported)} video(s), {s['codec']} in MP4"
        + (" (lossless RGB: the stored frames exactly)" if s.get("lossless") else f" (crf {s.get('crf')})")
        + "; one per source video, at the source's relative path with the suffix .mp4.",
        "Size: the ingest size (the manifest's `size`; the source's is `source_size`); fps and display",
        "rotation as ingested; the source's audio track copied unchanged when it had one.",
    ]
    if s.get("with_masks"):
        out.append("Masks: `<name>.mask" + (".mp4`" if s["with_masks"] == "video" else "/NNNNNN.png`")
                   + ": 255 where the pixel is synthetic (the avatar, r); lossless.")
    out += [
        "",
        "manifest.jsonl: first line the export (versions, classes, splits, settings), then one line per",
        "video: video_id, source, path, frames, fps, size, label, split, anonymize (backend and",
        "config hash per stage, settings_hash), audit metrics and audit_margin, status (exported /",
        "excluded / error) with reason, and files (path, bytes, sha256).",
        "",
        "Check every file against the manifest:  anonymask verify-export <this folder>",
        "",
        f"Not exported ({len(other)}):",
        *[f"  {v['video_id']}: {v.get('reason')}" for v in sorted(other, key=lambda v: v["video_id"])],
    ]
    if not other:
        out[-1] = "Not exported: none."
    return "\n".join(out) + "\n"


def verify_export(out: str | Path) -> dict[str, Any]:
    """Check every file the manifest lists (bytes, sha256) and that no other media file is there.

    Returns {"ok", "checked", "problems": ["path: what"]}.
    """
    out = Path(out)
    if not (out / MANIFEST).is_file():
        raise StoreError(f"{out}: no {MANIFEST} (not an anonymask export folder)")
    header, lines = read_manifest(out)
    if header is None:
        raise StoreError(f"{out}/{MANIFEST}: no export header line")
    problems, listed, checked = [], set(), 0
    for vid in sorted(lines):
        line = lines[vid]
        for f in line.get("files") or []:
            listed.add(f["path"])
            checked += 1
            why = check_file(out, f)
            if why:
                problems.append(f"{f['path']}: {why} (video {vid})")
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if rel in (MANIFEST, README) or any(part.startswith(".") for part in p.relative_to(out).parts):
            continue
        if p.is_file() and not any(rel == x or rel.startswith(x + "/") for x in listed):
            problems.append(f"{rel}: not in the manifest")
    return {"ok": not problems, "checked": checked, "problems": problems}
