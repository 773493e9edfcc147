"""The synthetic datasets the project generates itself (``demo``, ``synthetic``).

A root written by :func:`anonymask.models.shared.synthetic.generator.generate_dataset` holds
``dataset.json`` (classes, subjects, splits, one entry per video), ``videos/<id>.mp4`` and
``gt/<id>.npz`` (exact masks, SMPL-H parameters, joints, clean background). The adapter only reads
``dataset.json``; both names read the same layout (``demo`` is the small bundled set, ``synthetic``
the larger one for training experiments).

Each record: label and label_name from the action, ``split`` {"xsub": ..., "xview": ...},
``subject`` the first performer (``s03``), ``camera`` (``c01``..``c03``) and ``extra`` with
``gt`` (path of the npz), ``identity`` (every performer), ``gender`` (theirs), ``background``
and ``people`` (how many).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets._util import check_options
from anonymask.storage.datasets.base import DatasetAdapter, register
from anonymask.storage.store import VideoInfo

MANIFEST = "dataset.json"
_REQUIRED = ("classes", "splits", "videos")
_VIDEO_KEYS = ("video_id", "path", "label", "subjects")


@register
class DemoDataset(DatasetAdapter):
    name = "demo"
    splits = ["xsub", "xview"]

    def __init__(self, root: str | Path, **options: Any):
        check_options(self.name, options, ("check_files",))
        super().__init__(root, **options)
        self.manifest_path = self.root / MANIFEST
        self.doc = self._read_manifest()
        self.check_files = bool(options.get("check_files", True))

    def _read_manifest(self) -> dict[str, Any]:
        path = self.manifest_path
        if not path.is_file():
            raise DatasetError(
                f"{self.name}: {path} does not exist (generate the data first: "
                f"anonymask generate --preset {self.name} --root {self.root})"
            )
        try:
            doc = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DatasetError(f"{self.name}: {path} is not valid JSON ({e})") from e
        if not isinstance(doc, dict):
            raise DatasetError(f"{self.name}: {path} must hold a JSON object, not {type(doc).__name__}")
        missing = [k for k in _REQUIRED if k not in doc]
        if missing:
            raise DatasetError(f"{self.name}: {path} lacks the key(s) {', '.join(missing)}")
        if not isinstance(doc["videos"], list) or not isinstance(doc["classes"], list):
            raise DatasetError(f"{self.name}: {path}: 'videos' and 'classes' must be lists")
        for i, v in enumerate(doc["videos"]):
            lacking = [k for k in _VIDEO_KEYS if not isinstance(v, dict) or k not in v]
            if lacking:
                raise DatasetError(f"{self.name}: {path}: video #{i} lacks {', '.join(lacking)}")
            if not 0 <= int(v["label"]) < len(doc["classes"]):
                raise DatasetError(f"{self.name}: {path}: video {v['video_id']} has label {v['label']} "
                                   f"outside the {len(doc['classes'])} classes")
        return doc

    @property
    def classes(self) -> list[str]:
        return list(self.doc["classes"])

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update({k: self.doc[k] for k in ("name", "version", "seed", "fps", "frames", "size") if k in self.doc})
        out["split_members"] = self.doc["splits"]
        return out

    def records(self) -> Iterator[VideoInfo]:
        classes = self.classes
        for v in self.doc["videos"]:
            path = self.root / v["path"]
            gt = self.root / v.get("gt", f"gt/{v['video_id']}.npz")
            if self.check_files:
                for f in (path, gt):
                    if not f.is_file():
                        raise DatasetError(f"{self.name}: {f} is listed in {self.manifest_path} but missing")
            subjects = list(v["subjects"])
            yield VideoInfo(
                video_id=str(v["video_id"]),
                path=str(path),
                label=int(v["label"]),
                label_name=classes[int(v["label"])],
                split=dict(v.get("split", {})),
                subject=subjects[0] if subjects else None,
                camera=v.get("camera"),
                extra={
                    "gt": str(gt),
                    "identity": subjects,
                    "gender": list(v.get("genders", [])),
                    "background": v.get("background"),
                    "people": len(subjects),
                    "repetition": v.get("repetition"),
                },
            )


@register
class SyntheticDataset(DemoDataset):
    name = "synthetic"
