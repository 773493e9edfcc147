"""HMDB-51: ``<videos>/<class>/<name>.avi`` with the official 70/30 split files.

Split files: ``testTrainMulti_7030_splits/<class>_test_split{1,2,3}.txt`` under the root or next
to it (option ``splits_dir``), lines ``<name>.avi <0|1|2>``: 1 train, 2 test, 0 unused (a video
not listed counts as unused). Video names end with the dataset's meta tags
(``_<body part>_<camera motion>_<people>_<viewpoint>_<quality>_<n>``), parsed into ``extra`` when
present. Names contain characters such as ``#&()``: video ids are a safe form of the name
(``extra["name"]`` keeps the original). HMDB has no subject ids; ``subject`` stays None.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets._util import check_options, report_bad, safe_id, unique_ids
from anonymask.storage.datasets.base import DatasetAdapter, register
from anonymask.storage.datasets.ucf101 import find_dir
from anonymask.storage.store import VideoInfo

HMDB51_CLASSES = (
    "brush_hair", "cartwheel", "catch", "chew", "clap", "climb", "climb_stairs", "dive", "draw_sword",
    "dribble", "drink", "eat", "fall_floor", "fencing", "flic_flac", "golf", "handstand", "hit", "hug",
    "jump", "kick", "kick_ball", "kiss", "laugh", "pick", "pour", "pullup", "punch", "push", "pushup",
    "ride_bike", "ride_horse", "run", "shake_hands", "shoot_ball", "shoot_bow", "shoot_gun", "sit",
    "situp", "smile", "smoke", "somersault", "stand", "swing_baseball", "sword", "sword_exercise",
    "talk", "throw", "turn", "walk", "wave",
)  # fmt: skip
PROTOCOLS = ("split1", "split2", "split3")
_SPLIT_VALUE = {"1": "train", "2": "test", "0": "unused"}
_TAGS_RE = re.compile(
    r"_(?P<body>[fhul])_(?P<motion>cm|nm)_np(?P<people>\d+)_(?P<view>fr|ba|le|ri)_(?P<quality>bad|med|goo)_(?P<n>\d+)$"
)
_INDEX = {c: i for i, c in enumerate(HMDB51_CLASSES)}


def _read_split_file(path: Path) -> dict[str, str]:
    if not path.is_file():
        raise DatasetError(f"split file not found: expected {path}")
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or parts[1] not in _SPLIT_VALUE:
            raise DatasetError(f"{path}:{n}: expected '<name>.avi <0|1|2>', got {line!r}")
        out[parts[0]] = _SPLIT_VALUE[parts[1]]
    return out


@register
class HMDB51(DatasetAdapter):
    name = "hmdb51"
    splits: ClassVar[list[str]] = list(PROTOCOLS)

    def __init__(self, root: str | Path, **options: Any):
        super().__init__(root, **options)
        check_options(self.name, options, ("strict", "splits_dir", "videos_dir"))
        self.strict = bool(options.get("strict", True))
        self.splits_dir = find_dir(self.root, "testTrainMulti_7030_splits", options.get("splits_dir"))
        vd = options.get("videos_dir")
        self.videos_dir = Path(vd) if vd else self.root

    @property
    def classes(self) -> list[str]:
        return list(HMDB51_CLASSES)

    def records(self) -> Iterator[VideoInfo]:
        found, bad = [], []
        for path in sorted(self.videos_dir.rglob("*.avi")):
            cls = path.parent.name
            if cls not in _INDEX:
                bad.append((path, f"folder {cls!r} is not an HMDB-51 class"))
            else:
                found.append((path, cls))
        report_bad(self.name, self.videos_dir, bad, strict=self.strict, expected="<class>/<name>.avi")
        if not found:
            raise DatasetError(f"{self.name}: no videos <class>/<name>.avi under {self.videos_dir}")
        split_tables: dict[str, dict[str, dict[str, str]]] = {}
        for cls in sorted({c for _, c in found}):
            split_tables[cls] = {
                proto: _read_split_file(self.splits_dir / f"{cls}_test_split{k}.txt")
                for k, proto in enumerate(PROTOCOLS, start=1)
            }
        # file names hold '#', '&', '(' ...: ids are the safe form, the name stays in extra
        ids = unique_ids([safe_id(p.stem) for p, _ in found], [safe_id(f"{c}.{p.stem}") for p, c in found])
        for vid, (path, cls) in zip(ids, found):
            tables = split_tables[cls]
            extra: dict[str, Any] = {"name": path.name}
            m = _TAGS_RE.search(path.stem)
            if m:
                extra |= {
                    "body_part": m["body"],
                    "camera_motion": m["motion"],
                    "people": int(m["people"]),
                    "viewpoint": m["view"],
                    "quality": m["quality"],
                }
            yield VideoInfo(
                video_id=vid,
                path=str(path),
                label=_INDEX[cls],
                label_name=cls,
                split={proto: tables[proto].get(path.name, "unused") for proto in PROTOCOLS},
                subject=None,
                camera=None,
                setup=None,
                extra=extra,
            )
