"""anonymask: anonymize videos of people and train on them with differential privacy.

The top-level folders of the repository (cli/, bench/, deploy/, flows/, tasks/, config/, models/,
storage/, core/: docs/ARCHITECTURE.md) install as subpackages of this one, so everything is
imported as ``anonymask.<folder>...``. This folder holds only the root and the public dataset API
(``anonymask.data``).
"""

__version__ = "0.1.0"
PIPELINE_VERSION = "1"
