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
    from anonymask.models.synthetic.generator import generate_demo

    root = tmp_path_factory.mktemp("tiny") / "raw"
    generate_demo(root, preset="tiny", seed=0)
    return root


@pytest.fixture
def tiny_copy(tiny_dataset, tmp_path):
    """A private copy of the tiny set that a test may modify."""
    dst = tmp_path / "raw"
    shutil.copytree(tiny_dataset, dst)
    return dst
