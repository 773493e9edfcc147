"""Dataset adapters: NTU RGB+D 60/120, Toyota Smarthome, UCF-101, HMDB-51, folder, sample, demo.

``get_adapter(name, root)`` returns one; each module registers itself on import.
"""

from anonymask.storage.datasets.base import DatasetAdapter, available, get_adapter, register

__all__ = ["DatasetAdapter", "available", "get_adapter", "register"]
