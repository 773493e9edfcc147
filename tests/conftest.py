"""Session-wide test settings: offline, headless rendering, small thread counts."""

import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")

import numpy as np  # noqa: E402

if not hasattr(np, "infty"):
    np.infty = np.inf  # pyrender still uses np.infty (removed in numpy 2)
