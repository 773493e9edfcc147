"""Any folder of videos (``.mp4 .avi .mov .mkv .webm``, searched recursively): users' own data.

Video ids are the path relative to the root without its extension, made store-safe (``a/b.mp4`` ->
``a__b``); if two files would get the same id (``x.mp4`` and ``x.avi``) both keep their extension
in the id, and a numeric suffix settles any remaining clash.

Option ``labels=path.csv`` with rows ``path_or_id,label[,split]`` (an optional header row):
``path_or_id`` is the relative path (with or without extension), the file name, or the video id.
Labels that are all integers are used as given (classes ``"0".."K-1"``); otherwise classes are the
sorted distinct names. A ``split`` column gives the protocol ``"split"`` (train/test/val; videos
without a row are ``unused``). Without labels every video has label None.
Rows that name no video raise DatasetError (``strict=False``: a warning).
"""

from __future__ import annotations

import csv
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets._util import check_options, safe_id, unique_ids
from anonymask.storage.datasets.base import DatasetAdapter, register
from anonymask.storage.store import VideoInfo

FOLDER_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm")
_HEADER_WORDS = {"path_or_id", "path", "id", "video", "video_id", "file", "filename"}
_SPLIT_WORDS = {
    "train": "train", "training": "train", "test": "test", "testing": "test", "val": "val",
    "valid": "val", "validation": "val", "unused": "unused",
}  # fmt: skip


def list_videos(root: Path, extensions=FOLDER_EXTENSIONS) -> list[Path]:
    """Video files under ``root`` (hidden files and folders skipped), sorted.

    Also listed, so that they are reported as failed instead of silently skipped: symbolic links
    with a video extension whose target is gone (dangling), files with a video extension that
    cannot be read, and sub-folders that cannot be listed (permission denied): each later fails
    at ingest with the file and the reason named.
    """
    out: list[Path] = []
    unreadable: list[Path] = []

    def onerror(err: OSError) -> None:
        if err.filename and Path(err.filename) != root:
            unreadable.append(Path(err.filename))

    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror):
        base = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith("."):
                continue
            p = base / name
            if p.suffix.lower() in extensions and (p.is_file() or p.is_symlink()):
                out.append(p)
        for d in dirnames:  # a folder os.walk cannot enter is reported through onerror
            q = base / d
            if q.is_symlink() and q.suffix.lower() in extensions:
                out.append(q)
    out += [p for p in unreadable if not any(part.startswith(".") for part in p.relative_to(root).parts)]
    return sorted(set(out))


@register
class FolderDataset(DatasetAdapter):
    name = "folder"

    def __init__(self, root: str | Path, **options: Any):
        super().__init__(root, **options)
        check_options(self.name, options, ("labels", "strict"))
        if not self.root.is_dir():
            raise DatasetError(f"{self.name}: {self.root} is not a folder")
        self.strict = bool(options.get("strict", True))
        self.labels_path = Path(options["labels"]) if options.get("labels") else None
        self.videos = list_videos(self.root)
        if not self.videos:
            raise DatasetError(f"{self.name}: no videos ({' '.join(FOLDER_EXTENSIONS)}) under {self.root}")
        rels = [p.relative_to(self.root).as_posix() for p in self.videos]
        self.ids = unique_ids(
            [safe_id(r.rsplit(".", 1)[0]) for r in rels], [safe_id(r.replace(".", "_")) for r in rels]
        )
        self.rows = self._read_labels() if self.labels_path else {}
        self.has_split = any(r[1] is not None for r in self.rows.values())
        self.splits = ["split"] if self.has_split else []
        self._classes, self._label_of = self._label_space()

    # ------------------------------------------------------------------ labels CSV
    def _lookup(self) -> dict[str, int | None]:
        """key -> video index; None marks a key shared by several videos (ambiguous)."""
        table: dict[str, int | None] = {}

        def add(key: str, i: int) -> None:
            table[key] = i if table.get(key, i) == i else None

        for i, (p, vid) in enumerate(zip(self.videos, self.ids)):
            rel = p.relative_to(self.root).as_posix()
            for key in (rel, rel.rsplit(".", 1)[0], vid, p.name, p.stem):
                add(key, i)
        return table

    def _read_labels(self) -> dict[int, tuple[str, str | None]]:
        path = self.labels_path
        if not path.is_file():
            raise DatasetError(f"{self.name}: labels file {path} does not exist")
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
        if rows and rows[0][0].strip().lower() in _HEADER_WORDS:
            rows = rows[1:]
        lookup = self._lookup()
        out: dict[int, tuple[str, str | None]] = {}
        unmatched = []
        for n, row in enumerate(rows, start=1):
            cells = [c.strip() for c in row]
            if len(cells) not in (2, 3) or not cells[0] or not cells[1]:
                raise DatasetError(f"{path}: row {n}: expected 'path_or_id,label[,split]', got {row}")
            key = cells[0].replace("\\", "/")
            key = key[2:] if key.startswith("./") else key
            if key not in lookup:
                unmatched.append(cells[0])
                continue
            i = lookup[key]
            if i is None:
                raise DatasetError(
                    f"{path}: row {n}: {cells[0]!r} matches several videos; use the relative path"
                )
            split = None
            if len(cells) == 3 and cells[2]:
                split = _SPLIT_WORDS.get(cells[2].lower())
                if split is None:
                    raise DatasetError(f"{path}: row {n}: split {cells[2]!r} is not train/test/val/unused")
            if i in out:
                raise DatasetError(f"{path}: row {n}: video {self.ids[i]!r} is labelled twice")
            out[i] = (cells[1], split)
        if unmatched:
            shown = ", ".join(unmatched[:5]) + (
                f" (and {len(unmatched) - 5} more)" if len(unmatched) > 5 else ""
            )
            msg = f"{self.name}: {len(unmatched)} row(s) of {path} name no video under {self.root}: {shown}"
            if self.strict:
                raise DatasetError(msg + " (pass strict=False to ignore them)")
            warnings.warn(msg, stacklevel=2)
        return out

    def _label_space(self) -> tuple[list[str], dict[str, int]]:
        names = sorted({label for label, _ in self.rows.values()})
        if not names:
            return [], {}
        if all(n.lstrip("-").isdigit() for n in names):
            values = {n: int(n) for n in names}
            if min(values.values()) < 0:
                raise DatasetError(f"{self.labels_path}: integer labels must be >= 0")
            return [str(i) for i in range(max(values.values()) + 1)], values
        return names, {n: i for i, n in enumerate(names)}

    # ------------------------------------------------------------------ adapter API
    @property
    def classes(self) -> list[str]:
        return list(self._classes)

    def records(self) -> Iterator[VideoInfo]:
        for i, (path, vid) in enumerate(zip(self.videos, self.ids)):
            label_name, split = self.rows.get(i, (None, None))
            label = self._label_of[label_name] if label_name is not None else None
            yield VideoInfo(
                video_id=vid,
                path=str(path),
                label=label,
                label_name=self._classes[label] if label is not None else None,
                split={"split": split or "unused"} if self.has_split else {},
                extra={"relative_path": path.relative_to(self.root).as_posix(),
                       **({"entry": "unreadable folder"} if path.is_dir() and not path.is_symlink() else {})},
            )
