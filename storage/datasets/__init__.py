"""Dataset adapters: NTU RGB+D 60/120, Toyota Smarthome, UCF-101, HMDB-51, folder, sample, demo.

``get_adapter(name, root)`` returns one; each module registers itself on import.
"""

import importlib
import importlib.util

from anonymask.storage.datasets import folder, hmdb51, ntu, sample, tsh, ucf101  # noqa: F401  (register)
from anonymask.storage.datasets.base import DatasetAdapter, available, check_video_ids, get_adapter, register

# ``demo`` is written by another part of the project: import it when present, and let a real
# error inside it surface instead of hiding it behind "not installed".
if importlib.util.find_spec("anonymask.storage.datasets.demo") is not None:
    importlib.import_module("anonymask.storage.datasets.demo")

__all__ = ["DatasetAdapter", "available", "check_video_ids", "get_adapter", "register"]
