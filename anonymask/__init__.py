"""anonymask: anonymize videos of people and train on them with differential privacy.

The top-level folders of the repository (flows/, tasks/, models/, storage/, deploy/) install as
subpackages of this one, so everything is imported as ``anonymask.<folder>...``.
"""

__version__ = "0.1.0"
PIPELINE_VERSION = "1"
