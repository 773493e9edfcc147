"""What every dataset adapter provides, and the registry that finds one by name.

An adapter turns a dataset's folder (its real naming convention and split files) into
:class:`~anonymask.storage.store.VideoInfo` records. It never decodes video: that is the ingest
stage's job, so listing a 100k-video dataset stays fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from anonymask.core.errors import DatasetError
from anonymask.storage.store import VideoInfo

_REGISTRY: dict[str, type[DatasetAdapter]] = {}


class DatasetAdapter:
    """Base class. Subclasses set ``name``, ``classes`` and ``splits`` and yield records."""

    name: ClassVar[str] = ""
    #: False for adapters that find their videos elsewhere (installed packages) and ignore ``root``
    reads_root: ClassVar[bool] = True
    #: protocol names, e.g. ["xsub", "xview"]; each record's ``split`` maps protocol -> train/test
    splits: ClassVar[list[str]] = []

    def __init__(self, root: str | Path, **options: Any):
        self.root = Path(root)
        self.options = options
        if not self.root.exists():
            raise DatasetError(f"{self.name}: dataset folder {self.root} does not exist")

    @property
    def classes(self) -> list[str]:
        raise NotImplementedError

    def records(self) -> Iterator[VideoInfo]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """Dataset-level attrs for the store."""
        return {
            "dataset": self.name,
            "source": str(self.root),
            "classes": self.classes,
            "splits": list(self.splits),
        }


def register(cls: type[DatasetAdapter]) -> type[DatasetAdapter]:
    """Class decorator: make an adapter available by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def available() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get_adapter(name: str, root: str | Path, **options: Any) -> DatasetAdapter:
    """The adapter ``name`` over the folder ``root``."""
    _load_all()
    if name not in _REGISTRY:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](root, **options)


def check_video_ids(dataset: str, known: set[str], wanted: list[str]) -> None:
    """``wanted`` (a user's ``--videos``) must all be videos of the dataset: one line otherwise."""
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        some = ", ".join(sorted(known)[:5]) + (", ..." if len(known) > 5 else "")
        raise DatasetError(f"unknown video id(s) for {dataset}: {', '.join(unknown)} (the dataset has {len(known)} "
                           f"videos: {some})")


def _load_all() -> None:
    # Importing the package imports every adapter module, which registers them.
    import anonymask.storage.datasets  # noqa: F401
