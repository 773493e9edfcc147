"""bench_steps runs every mode on the same model and batch and reports times (never asserted)."""

from __future__ import annotations

import json

import torch

from anonymask.bench.privacy import bench_steps
from anonymask.models.training.privacy.toy import tiny_model_factory


def test_bench_steps_reports_every_mode():
    gen = torch.Generator().manual_seed(0)
    batch = (torch.randn(4, 3, 4, 16, 16, generator=gen), torch.randint(0, 5, (4,), generator=gen))
    out = bench_steps(tiny_model_factory, batch, modes=("nonprivate", "dpsgd", "dpsgd_func", "maskdp", "fpdp"), repeats=2, warmup=1)
    assert set(out["modes"]) == {"nonprivate", "dpsgd", "dpsgd_func", "maskdp", "fpdp"}
    for mode, entry in out["modes"].items():
        assert "error" not in entry, mode
        assert len(entry["times_s"]) == 2 and entry["min_s"] > 0
    assert out["modes"]["fpdp"]["subspace_refresh_s"] > 0
    assert out["config"]["batch_size"] == 4
    json.dumps(out)  # JSON-ready for make bench


def test_bench_reports_incompatible_mode_instead_of_failing():
    class RootParam(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(1))
            self.inner = tiny_model_factory(0)
            self.num_tokens = self.inner.num_tokens

        def forward(self, x, token_keep=None):
            return self.scale * self.inner(x, token_keep=token_keep)

    batch = {"x": torch.randn(2, 3, 4, 16, 16), "y": torch.tensor([0, 1])}
    out = bench_steps(RootParam, batch, modes=("dpsgd", "maskdp"), repeats=1, warmup=0)
    assert "error" in out["modes"]["dpsgd"]
    assert out["modes"]["maskdp"]["min_s"] > 0
