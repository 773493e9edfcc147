"""What each dataset starts from before the user's overrides: one table for the anonymize pipeline
(per-stage settings, on top of the stages' own defaults) and for action training (``TrainSettings``
fields, on top of the model's defaults).

Training defaults follow the MaskDP paper's fine-tuning recipe for the real datasets (batch 128,
C = 1, lr 0.01, 150 epochs on NTU / Toyota Smarthome and 300 on UCF-101, 20 warmup epochs then
cosine, delta 1e-6 on NTU and 1e-5 otherwise, MViTv2-S from Kinetics-400 with the normalisation
layers of the last two blocks + head trainable). The bundled synthetic sets get a tiny network and
a few epochs so a run finishes in seconds to minutes on a laptop CPU. Pipeline defaults set the
working size (``ingest.max_side``) per dataset and NTU's own skeletons as the pose backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the bundled synthetic sets: a tiny network, a few epochs
_TINY: dict[str, Any] = {
    "arch": "tiny",
    "weights": "random",
    "clip_len": 8,
    "frame_stride": 4,
    "size": [48, 64],
    "epochs": 10,
    "batch_size": 16,
    "lr": 0.1,
    "warmup_epochs": 1,
    "epsilon": 8.0,
    "fpdp_k": 8,
    "fpdp_refresh_every": 20,
    "fpdp_public_size": 32,
    "num_workers": 0,
    "eval_every": 1,
    "log_every": 1,
}



@dataclass(frozen=True)
class DatasetDefaults:
    """A dataset's starting point: ``pipeline`` maps stage -> settings, ``training`` holds
    ``TrainSettings`` fields."""

    pipeline: dict[str, dict[str, Any]] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)


#: every dataset adapter (storage/datasets) has a row; tests/test_dataset_defaults.py checks it
DATASETS: dict[str, DatasetDefaults] = {
    "demo": DatasetDefaults(pipeline={"ingest": {"max_side": 320}}, training=_TINY),
    "synthetic": DatasetDefaults(pipeline={"ingest": {"max_side": 320}}, training=_TINY),
    "sample": DatasetDefaults(pipeline={"ingest": {"max_side": 480}}),
    "folder": DatasetDefaults(),
    "ntu": DatasetDefaults(pipeline={"pose4d": {"backend": "ntu-skeleton"}, "ingest": {"max_side": 640}},
                           training={"delta": 1e-6, "epochs": 150}),
    "ntu120": DatasetDefaults(pipeline={"pose4d": {"backend": "ntu-skeleton"}, "ingest": {"max_side": 640}},
                              training={"delta": 1e-6, "epochs": 150}),
    "tsh": DatasetDefaults(pipeline={"ingest": {"max_side": 640}}, training={"delta": 1e-5, "epochs": 150}),
    "ucf101": DatasetDefaults(pipeline={"ingest": {"max_side": 320}},
                              training={"delta": 1e-5, "epochs": 300, "protocol": "split1"}),
    "hmdb51": DatasetDefaults(pipeline={"ingest": {"max_side": 320}},
                              training={"delta": 1e-5, "epochs": 300, "protocol": "split1"}),
}  # fmt: skip


def dataset_defaults(dataset: str) -> DatasetDefaults:
    """The dataset's row (an unknown name starts from the stages' and the model's own defaults)."""
    return DATASETS.get(dataset, DatasetDefaults())
