"""UCF-101: ``<videos>/<ClassName>/v_<ClassName>_gXX_cXX.avi`` with the official split lists.

Split files live in ``ucfTrainTestlist/`` (``classInd.txt``, ``trainlist0{1,2,3}.txt``,
``testlist0{1,2,3}.txt``), found under the root or next to it (option ``splits_dir``). Labels
come from ``classInd.txt`` (1-based there, 0-based here). Protocols ``split1..3``: a video listed
in ``trainlist0k`` is ``train``, in ``testlist0k`` ``test``, in neither ``unused``.
``subject`` is the group ``gXX`` (the 25 groups are what the official splits keep apart).
Class names are matched case-insensitively: the dataset's own lists spell one class
``HandstandPushups`` and its files ``v_HandStandPushups_...``.
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

UCF101_CLASSES = (
    "ApplyEyeMakeup", "ApplyLipstick", "Archery", "BabyCrawling", "BalanceBeam", "BandMarching",
    "BaseballPitch", "Basketball", "BasketballDunk", "BenchPress", "Biking", "Billiards",
    "BlowDryHair", "BlowingCandles", "BodyWeightSquats", "Bowling", "BoxingPunchingBag",
    "BoxingSpeedBag", "BreastStroke", "BrushingTeeth", "CleanAndJerk", "CliffDiving",
    "CricketBowling", "CricketShot", "CuttingInKitchen", "Diving", "Drumming", "Fencing",
    "FieldHockeyPenalty", "FloorGymnastics", "FrisbeeCatch", "FrontCrawl", "GolfSwing", "Haircut",
    "Hammering", "HammerThrow", "HandstandPushups", "HandstandWalking", "HeadMassage", "HighJump",
    "HorseRace", "HorseRiding", "HulaHoop", "IceDancing", "JavelinThrow", "JugglingBalls",
    "JumpingJack", "JumpRope", "Kayaking", "Knitting", "LongJump", "Lunges", "MilitaryParade",
    "Mixing", "MoppingFloor", "Nunchucks", "ParallelBars", "PizzaTossing", "PlayingCello",
    "PlayingDaf", "PlayingDhol", "PlayingFlute", "PlayingGuitar", "PlayingPiano", "PlayingSitar",
    "PlayingTabla", "PlayingViolin", "PoleVault", "PommelHorse", "PullUps", "Punch", "PushUps",
    "Rafting", "RockClimbingIndoor", "RopeClimbing", "Rowing", "SalsaSpin", "ShavingBeard",
    "Shotput", "SkateBoarding", "Skiing", "Skijet", "SkyDiving", "SoccerJuggling", "SoccerPenalty",
    "StillRings", "SumoWrestling", "Surfing", "Swing", "TableTennisShot", "TaiChi", "TennisSwing",
    "ThrowDiscus", "TrampolineJumping", "Typing", "UnevenBars", "VolleyballSpiking",
    "WalkingWithDog", "WallPushups", "WritingOnBoard", "YoYo",
)  # fmt: skip
NAME_RE = re.compile(r"^v_(?P<cls>[A-Za-z]+)_g(?P<g>\d+)_c(?P<c>\d+)$")
_EXPECTED = "<ClassName>/v_<ClassName>_gXX_cXX.avi"
PROTOCOLS = ("split1", "split2", "split3")


def find_dir(root: Path, name: str, option: str | Path | None) -> Path:
    """``option`` if given, else ``root/name`` or ``root/../name``; DatasetError naming the path."""
    if option is not None:
        candidates = [Path(option)]
    else:
        candidates = [root / name, root.parent / name]
    for c in candidates:
        if c.is_dir():
            return c
    raise DatasetError(
        f"split folder not found: expected {candidates[0]}"
        + (f" (or {candidates[1]})" if len(candidates) > 1 else "")
    )


def _need(path: Path) -> Path:
    if not path.is_file():
        raise DatasetError(f"split file not found: expected {path}")
    return path


def _list_names(path: Path) -> set[str]:
    """Lower-case file names listed in a train/test list (``Class/v_..avi [label]`` lines)."""
    out = set()
    for line in _need(path).read_text().splitlines():
        parts = line.strip().split()
        if parts:
            out.add(Path(parts[0].replace("\\", "/")).name.lower())
    return out


@register
class UCF101(DatasetAdapter):
    name = "ucf101"
    splits: ClassVar[list[str]] = list(PROTOCOLS)

    def __init__(self, root: str | Path, **options: Any):
        super().__init__(root, **options)
        check_options(self.name, options, ("strict", "splits_dir", "videos_dir"))
        self.strict = bool(options.get("strict", True))
        self.splits_dir = find_dir(self.root, "ucfTrainTestlist", options.get("splits_dir"))
        vd = options.get("videos_dir")
        self.videos_dir = (
            Path(vd) if vd else (self.root / "UCF-101" if (self.root / "UCF-101").is_dir() else self.root)
        )
        self._classes = self._read_class_index()

    def _read_class_index(self) -> list[str]:
        path = _need(self.splits_dir / "classInd.txt")
        entries = {}
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2 or not parts[0].isdigit():
                raise DatasetError(f"{path}:{n}: expected '<index> <ClassName>', got {line!r}")
            entries[int(parts[0])] = parts[1]
        if sorted(entries) != list(range(1, len(entries) + 1)) or len(entries) != len(UCF101_CLASSES):
            raise DatasetError(
                f"{path}: expected indices 1..{len(UCF101_CLASSES)}, got {len(entries)} entries"
            )
        classes = [entries[i] for i in range(1, len(entries) + 1)]
        unknown = sorted({c.lower() for c in classes} - {c.lower() for c in UCF101_CLASSES})
        if unknown:
            raise DatasetError(f"{path}: not UCF-101 class names: {', '.join(unknown[:5])}")
        return classes

    @property
    def classes(self) -> list[str]:
        return list(self._classes)

    def records(self) -> Iterator[VideoInfo]:
        members = {}
        for k, proto in enumerate(PROTOCOLS, start=1):
            members[proto] = (
                _list_names(self.splits_dir / f"trainlist0{k}.txt"),
                _list_names(self.splits_dir / f"testlist0{k}.txt"),
            )
        index = {c.lower(): i for i, c in enumerate(self._classes)}
        found, bad = [], []
        for path in sorted(self.videos_dir.rglob("*.avi")):
            m = NAME_RE.match(path.stem)
            folder = path.parent.name.lower()
            if m is None:
                bad.append((path, "malformed name"))
            elif m["cls"].lower() not in index:
                bad.append((path, f"unknown class {m['cls']!r}"))
            elif folder != m["cls"].lower():
                bad.append((path, f"class {m['cls']!r} in folder {path.parent.name!r}"))
            else:
                found.append((path, m))
        report_bad(self.name, self.videos_dir, bad, strict=self.strict, expected=_EXPECTED)
        if not found:
            raise DatasetError(f"{self.name}: no videos named {_EXPECTED} under {self.videos_dir}")
        for path, m in found:
            key = path.name.lower()
            split = {}
            for proto, (train, test) in members.items():
                split[proto] = "train" if key in train else "test" if key in test else "unused"
            label = index[m["cls"].lower()]
            yield VideoInfo(
                video_id=path.stem,
                path=str(path),
                label=label,
                label_name=self._classes[label],
                split=split,
                subject=f"g{int(m['g']):02d}",
                camera=None,
                setup=None,
                extra={"clip": int(m["c"])},
            )
