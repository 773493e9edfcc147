"""NTU RGB+D 60 (``ntu``) and NTU RGB+D 120 (``ntu120``).

Videos are ``SsssCcccPpppRrrrAaaa_rgb.avi`` (setup, camera, performer, replication, action),
usually in ``nturgb+d_rgb/``; the root is searched recursively. Protocols:

* ``ntu``: ``xsub`` (20 training performers, the rest test) and ``xview`` (cameras 2 and 3 train,
  camera 1 test). Only actions A001-A060.
* ``ntu120``: ``xsub`` (the published 53 training performers) and ``xset`` (even setup ids train,
  odd ones test). Actions A001-A120.

When ``nturgb+d_skeletons/<name>.skeleton`` exists anywhere under the root, its path is put in
``extra["skeleton"]`` (the offline pose backend fits SMPL-H to these joints). Option
``ignore_list=path`` drops the samples named in a text file (NTU publishes the list of samples
whose skeletons are missing). Option ``strict`` (default True) makes malformed names an error;
with ``strict=False`` they are skipped with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets._util import check_options, read_name_list, report_bad
from anonymask.storage.datasets.base import DatasetAdapter, register
from anonymask.storage.store import VideoInfo

NTU60_CLASSES = (
    "drink water", "eat meal/snack", "brushing teeth", "brushing hair", "drop", "pickup", "throw",
    "sitting down", "standing up (from sitting position)", "clapping", "reading", "writing",
    "tear up paper", "wear jacket", "take off jacket", "wear a shoe", "take off a shoe",
    "wear on glasses", "take off glasses", "put on a hat/cap", "take off a hat/cap", "cheer up",
    "hand waving", "kicking something", "reach into pocket", "hopping (one foot jumping)", "jump up",
    "make a phone call/answer phone", "playing with phone/tablet", "typing on a keyboard",
    "pointing to something with finger", "taking a selfie", "check time (from watch)",
    "rub two hands together", "nod head/bow", "shake head", "wipe face", "salute",
    "put the palms together", "cross hands in front (say stop)", "sneeze/cough", "staggering",
    "falling", "touch head (headache)", "touch chest (stomachache/heart pain)",
    "touch back (backache)", "touch neck (neckache)", "nausea or vomiting condition",
    "use a fan (with hand or paper)/feeling warm", "punching/slapping other person",
    "kicking other person", "pushing other person", "pat on back of other person",
    "point finger at the other person", "hugging other person", "giving something to other person",
    "touch other person's pocket", "handshaking", "walking towards each other",
    "walking apart from each other",
)  # fmt: skip
NTU120_EXTRA_CLASSES = (
    "put on headphone", "take off headphone", "shoot at the basket", "bounce ball",
    "tennis bat swing", "juggling table tennis balls", "hush (quiet)", "flick hair", "thumb up",
    "thumb down", "make ok sign", "make victory sign", "staple book", "counting money",
    "cutting nails", "cutting paper (using scissors)", "snapping fingers", "open bottle",
    "sniff (smell)", "squat down", "toss a coin", "fold paper", "ball up paper", "play magic cube",
    "apply cream on face", "apply cream on hand back", "put on bag", "take off bag",
    "put something into a bag", "take something out of a bag", "open a box", "move heavy objects",
    "shake fist", "throw up cap/hat", "hands up (both hands)", "cross arms", "arm circles",
    "arm swings", "running on the spot", "butt kicks (kick backward)", "cross toe touch",
    "side kick", "yawn", "stretch oneself", "blow nose", "hit other person with something",
    "wield knife towards other person", "knock over other person (hit with body)",
    "grab other person's stuff", "shoot at other person with a gun", "step on foot", "high-five",
    "cheers and drink", "carry something with other person", "take a photo of other person",
    "follow other person", "whisper in other person's ear", "exchange things with other person",
    "support somebody with hand", "finger-guessing game (playing rock-paper-scissors)",
)  # fmt: skip
NTU120_CLASSES = NTU60_CLASSES + NTU120_EXTRA_CLASSES
#: actions performed by two people (1-based ids): the pose stage then keeps two bodies
MUTUAL_ACTIONS = frozenset(range(50, 61)) | frozenset(range(106, 121))

NTU60_XSUB_TRAIN = frozenset(
    (1, 2, 4, 5, 8, 9, 13, 14, 15, 16, 17, 18, 19, 25, 27, 28, 31, 34, 35, 38)
)  # fmt: skip
NTU120_XSUB_TRAIN = NTU60_XSUB_TRAIN | frozenset(
    (45, 46, 47, 49, 50, 52, 53, 54, 55, 56, 57, 58, 59, 70, 74, 78, 80, 81, 82, 83, 84, 85, 86, 89,
     91, 92, 93, 94, 95, 97, 98, 100, 103)
)  # fmt: skip
NTU60_XVIEW_TRAIN_CAMERAS = frozenset((2, 3))

NAME_RE = re.compile(r"^S(\d{3})C(\d{3})P(\d{3})R(\d{3})A(\d{3})$")
_EXPECTED = "SsssCcccPpppRrrrAaaa_rgb.avi"


def parse_ntu_name(name: str) -> dict[str, int] | None:
    """``S001C002P003R002A013`` (any suffix such as ``_rgb.avi`` removed) -> ids, else None."""
    m = NAME_RE.match(name)
    if not m:
        return None
    s, c, p, r, a = (int(g) for g in m.groups())
    return {"setup": s, "camera": c, "subject": p, "replication": r, "action": a}


def _is_candidate(path: Path) -> bool:
    if path.suffix.lower() != ".avi":
        return False
    return path.name.endswith("_rgb.avi") or any(part.startswith("nturgb+d_rgb") for part in path.parts[:-1])


class _NTUBase(DatasetAdapter):
    num_classes: ClassVar[int] = 60
    _OPTIONS = ("strict", "ignore_list", "skeletons")

    def __init__(self, root: str | Path, **options: Any):
        super().__init__(root, **options)
        check_options(self.name, options, self._OPTIONS)
        self.strict = bool(options.get("strict", True))
        ignore = options.get("ignore_list")
        self.ignored = read_name_list(ignore, self.name) if ignore else set()
        self.attach_skeletons = bool(options.get("skeletons", True))

    @property
    def classes(self) -> list[str]:
        return list(NTU120_CLASSES[: self.num_classes])

    def _split(self, ids: dict[str, int]) -> dict[str, str]:
        raise NotImplementedError

    def _skeletons(self) -> dict[str, Path]:
        if not self.attach_skeletons:
            return {}
        return {p.stem: p for p in sorted(self.root.rglob("*.skeleton"))}

    def records(self) -> Iterator[VideoInfo]:
        found, bad = [], []
        for path in sorted(self.root.rglob("*")):
            if not path.is_file() or not _is_candidate(path):
                continue
            stem = path.name[: -len("_rgb.avi")] if path.name.endswith("_rgb.avi") else path.stem
            ids = parse_ntu_name(stem)
            if ids is None:
                bad.append((path, "malformed name"))
            elif not 1 <= ids["action"] <= self.num_classes:
                hint = " (an NTU-120 action: use dataset 'ntu120')" if ids["action"] <= 120 else ""
                bad.append((path, f"action A{ids['action']:03d} outside A001-A{self.num_classes:03d}{hint}"))
            elif min(ids.values()) < 1:
                bad.append((path, "an id is 000"))
            else:
                found.append((stem, path, ids))
        report_bad(self.name, self.root, bad, strict=self.strict, expected=_EXPECTED)
        if not found:
            raise DatasetError(f"{self.name}: no videos named {_EXPECTED} under {self.root}")
        seen: dict[str, Path] = {}
        skeletons = self._skeletons()
        for stem, path, ids in found:
            if stem in self.ignored:
                continue
            if stem in seen:
                raise DatasetError(f"{self.name}: sample {stem} found twice: {seen[stem]} and {path}")
            seen[stem] = path
            extra: dict[str, Any] = {"replication": ids["replication"], "action_id": ids["action"]}
            extra["mutual"] = ids["action"] in MUTUAL_ACTIONS
            if stem in skeletons:
                extra["skeleton"] = str(skeletons[stem])
            yield VideoInfo(
                video_id=stem,
                path=str(path),
                label=ids["action"] - 1,
                label_name=NTU120_CLASSES[ids["action"] - 1],
                split=self._split(ids),
                subject=f"P{ids['subject']:03d}",
                camera=f"C{ids['camera']:03d}",
                setup=f"S{ids['setup']:03d}",
                extra=extra,
            )


@register
class NTU60(_NTUBase):
    name = "ntu"
    splits: ClassVar[list[str]] = ["xsub", "xview"]
    num_classes = 60

    def _split(self, ids: dict[str, int]) -> dict[str, str]:
        return {
            "xsub": "train" if ids["subject"] in NTU60_XSUB_TRAIN else "test",
            "xview": "train" if ids["camera"] in NTU60_XVIEW_TRAIN_CAMERAS else "test",
        }


@register
class NTU120(_NTUBase):
    name = "ntu120"
    splits: ClassVar[list[str]] = ["xsub", "xset"]
    num_classes = 120

    def _split(self, ids: dict[str, int]) -> dict[str, str]:
        return {
            "xsub": "train" if ids["subject"] in NTU120_XSUB_TRAIN else "test",
            "xset": "train" if ids["setup"] % 2 == 0 else "test",
        }
