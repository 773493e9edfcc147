"""Toyota Smarthome (trimmed): ``<Action>_pXX_rXX_vXX_cXX.mp4``, 31 activity classes.

Tokens: ``p`` performer, ``r`` recording round, ``v`` video number, ``c`` camera (1-7). The action
may contain dots (``Cook.Cleandishes``). Protocols, as described by the dataset authors
(Das et al., ICCV 2019) and used by public code:

* ``xsub``: performers 3, 4, 6, 7, 9, 12, 13, 15, 17, 19, 25 train; the other 7 test.
* ``xview1``: camera 1 train, camera 5 validation (``"val"``), camera 2 test.
* ``xview2``: cameras 1, 3, 4, 6, 7 train, camera 5 validation, camera 2 test.
  (The project brief said "cameras 1 and 3"; the public descriptions list 1, 3, 4, 6, 7 --
  we follow the public descriptions.)

The cross-view protocols only use the 19 actions that every view shows; videos of the other 12
get ``"unused"`` there. Labels stay in the 31-class space of the store; ``extra["label_cv"]`` is
the index in the 19-class cross-view list (None for the others).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets._util import check_options, report_bad
from anonymask.storage.datasets.base import DatasetAdapter, register
from anonymask.storage.store import VideoInfo

TSH_CLASSES = (
    "Cook.Cleandishes", "Cook.Cleanup", "Cook.Cut", "Cook.Stir", "Cook.Usestove", "Cutbread",
    "Drink.Frombottle", "Drink.Fromcan", "Drink.Fromcup", "Drink.Fromglass", "Eat.Attable",
    "Eat.Snack", "Enter", "Getup", "Laydown", "Leave", "Makecoffee.Pourgrains",
    "Makecoffee.Pourwater", "Maketea.Boilwater", "Maketea.Insertteabag", "Pour.Frombottle",
    "Pour.Fromcan", "Pour.Fromkettle", "Readbook", "Sitdown", "Takepills", "Uselaptop",
    "Usetablet", "Usetelephone", "Walk", "WatchTV",
)  # fmt: skip
TSH_CV_CLASSES = (
    "Cutbread", "Drink.Frombottle", "Drink.Fromcan", "Drink.Fromcup", "Drink.Fromglass",
    "Eat.Attable", "Eat.Snack", "Enter", "Getup", "Leave", "Pour.Frombottle", "Pour.Fromcan",
    "Readbook", "Sitdown", "Takepills", "Uselaptop", "Usetablet", "Usetelephone", "Walk",
)  # fmt: skip
TSH_XSUB_TRAIN = frozenset((3, 4, 6, 7, 9, 12, 13, 15, 17, 19, 25))
_XVIEW_TRAIN = {"xview1": frozenset((1,)), "xview2": frozenset((1, 3, 4, 6, 7))}
_XVIEW_VAL = frozenset((5,))
_XVIEW_TEST = frozenset((2,))

NAME_RE = re.compile(r"^(?P<action>[A-Za-z][A-Za-z0-9.]*?)_p(?P<p>\d+)_r(?P<r>\d+)_v(?P<v>\d+)_c(?P<c>\d+)$")
_EXPECTED = "<Action>_pXX_rXX_vXX_cXX.mp4"
_CLASS_INDEX = {c: i for i, c in enumerate(TSH_CLASSES)}
_CV_INDEX = {c: i for i, c in enumerate(TSH_CV_CLASSES)}


def parse_tsh_name(stem: str) -> dict[str, Any] | None:
    m = NAME_RE.match(stem)
    if not m:
        return None
    return {
        "action": m["action"],
        "subject": int(m["p"]),
        "round": int(m["r"]),
        "video": int(m["v"]),
        "camera": int(m["c"]),
    }


def tsh_split(action: str, subject: int, camera: int) -> dict[str, str]:
    split = {"xsub": "train" if subject in TSH_XSUB_TRAIN else "test"}
    for proto, train in _XVIEW_TRAIN.items():
        if action not in _CV_INDEX:
            split[proto] = "unused"
        elif camera in train:
            split[proto] = "train"
        elif camera in _XVIEW_VAL:
            split[proto] = "val"
        elif camera in _XVIEW_TEST:
            split[proto] = "test"
        else:
            split[proto] = "unused"
    return split


@register
class ToyotaSmarthome(DatasetAdapter):
    name = "tsh"
    splits: ClassVar[list[str]] = ["xsub", "xview1", "xview2"]

    def __init__(self, root: str | Path, **options: Any):
        super().__init__(root, **options)
        check_options(self.name, options, ("strict",))
        self.strict = bool(options.get("strict", True))

    @property
    def classes(self) -> list[str]:
        return list(TSH_CLASSES)

    def records(self) -> Iterator[VideoInfo]:
        found, bad = [], []
        for path in sorted(self.root.rglob("*.mp4")):
            ids = parse_tsh_name(path.stem)
            if ids is None:
                bad.append((path, "malformed name"))
            elif ids["action"] not in _CLASS_INDEX:
                bad.append((path, f"unknown action {ids['action']!r}"))
            else:
                found.append((path, ids))
        report_bad(self.name, self.root, bad, strict=self.strict, expected=f"{_EXPECTED} with a known action")
        if not found:
            raise DatasetError(f"{self.name}: no videos named {_EXPECTED} under {self.root}")
        seen: dict[str, Path] = {}
        for path, ids in found:
            vid = path.stem
            if vid in seen:
                raise DatasetError(f"{self.name}: video {vid} found twice: {seen[vid]} and {path}")
            seen[vid] = path
            action = ids["action"]
            yield VideoInfo(
                video_id=vid,
                path=str(path),
                label=_CLASS_INDEX[action],
                label_name=action,
                split=tsh_split(action, ids["subject"], ids["camera"]),
                subject=f"p{ids['subject']:02d}",
                camera=f"c{ids['camera']:02d}",
                setup=None,
                extra={"round": ids["round"], "video": ids["video"], "label_cv": _CV_INDEX.get(action)},
            )
