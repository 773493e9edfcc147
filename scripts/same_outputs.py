"""Check that a change to the code's layout changed no output: the demo's stores and the training
runs' weights, bit for bit.

    python scripts/same_outputs.py run OUT        # the demo + four tiny training runs into OUT
    python scripts/same_outputs.py run OUT --no-demo   # only the training runs (a minute or two)
    python scripts/same_outputs.py compare A B    # every stored array and every checkpoint tensor

Run ``run`` once with the old code and once with the new (a clone at the old commit does), then
``compare``: it lists every array or tensor that differs and exits 1 if any does. The commands go
through ``python -m anonymask.cli``, so the script works on either side of a move. Timings,
dates and paths in records are not compared; what the stages computed is.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

MODES = ("nonprivate", "dp", "maskdp", "fpdp")
#: the training test's tiny settings (tests/flows/test_train_flow.py)
TINY = {
    "size": [32, 32], "clip_len": 8, "frame_stride": 1, "epochs": 1, "batch_size": 4, "noise_seed": 0,
    "sampling_seed": 1, "public_seed": 2, "compare_accountants": [], "fpdp_public_size": 4, "fpdp_k": 2,
}  # fmt: skip
#: record fields that describe when or where, not what
VOLATILE = ("time", "started", "finished", "duration", "seconds", "host", "pid", "path", "source", "url",
            "created", "updated", "run_id", "flow_run")  # fmt: skip


def _cli(args: list[str], env: dict[str, str]) -> None:
    cmd = [sys.executable, "-m", "anonymask.cli", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, env=env, check=True)


def run(out: Path, demo: bool = True) -> None:
    out.mkdir(parents=True, exist_ok=False)
    env = dict(os.environ, ANONYMASK_DATA=str(out / "data"), PREFECT_HOME=str(out / "prefect"))
    if demo:
        _cli(["demo"], env)
    store = str(out / "syn.zarr")
    code = ("import sys\n"
            "from anonymask.models.training.action.synthetic import make_synthetic_store\n"
            if _has("anonymask.models.training") else
            "import sys\nfrom anonymask.models.action.synthetic import make_synthetic_store\n")
    code += ("make_synthetic_store(sys.argv[1], num_classes=3, videos_per_class={'train': 4, 'test': 2}, "
             "frames=10, size=(32, 32))\n")
    subprocess.run([sys.executable, "-c", code, store], env=env, check=True)
    sets = [f"{k}={json.dumps(v)}" for k, v in TINY.items()]
    for mode in MODES:
        _cli(["train", "--mode", mode, "--dataset", "synthetic", "--store", store, "--epsilon", "3",
              "--runs-dir", str(out / "runs" / mode), "--no-progress", "--set", *sets], env)  # fmt: skip


def _has(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _arrays(root: Path) -> dict[str, object]:
    import zarr

    out = {}
    for store in sorted(root.rglob("*.zarr")):
        if any(p.suffix == ".zarr" for p in store.relative_to(root).parents if p != Path(".")):
            continue
        group = zarr.open_group(str(store), mode="r")
        for name, node in group.members(max_depth=None):
            if isinstance(node, zarr.Array):
                out[f"{store.relative_to(root)}/{name}"] = node
    return out


def _stable(value, root: str):
    """Attributes without the volatile keys, the run folder's own path written as <root>."""
    if isinstance(value, dict):
        return {k: _stable(v, root) for k, v in sorted(value.items()) if not any(w in k.lower() for w in VOLATILE)}
    if isinstance(value, list):
        return [_stable(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, "<root>")
    return value


def _groups_attrs(root: Path) -> dict[str, dict]:
    import zarr

    out = {}
    for store in sorted(root.rglob("*.zarr")):
        group = zarr.open_group(str(store), mode="r")
        for name, node in [("", group), *group.members(max_depth=None)]:
            out[f"{store.relative_to(root)}/{name}"] = _stable(dict(node.attrs), str(root.resolve()))
    return out


def _checkpoints(root: Path) -> dict[str, dict]:
    import torch

    found = {}
    for path in sorted((root / "runs").rglob("*.pt")):
        key = str(path.relative_to(root / "runs")).split("/", 1)[0]  # the mode (run names carry hashes)
        state = torch.load(path, map_location="cpu", weights_only=False)
        found[f"{key}/{path.name}"] = _tensors("", {k: v for k, v in state.items() if k != "rng"}, {})
    return found


def _tensors(prefix: str, value, out: dict) -> dict:
    import torch

    if isinstance(value, torch.Tensor):
        out[prefix] = value
    elif isinstance(value, dict):
        for k, v in value.items():
            _tensors(f"{prefix}.{k}" if prefix else str(k), v, out)
    return out


def compare(a: Path, b: Path) -> int:
    import numpy as np
    import torch

    diffs: list[str] = []
    arrays_a, arrays_b = _arrays(a), _arrays(b)
    for name in sorted(set(arrays_a) | set(arrays_b)):
        if name not in arrays_a or name not in arrays_b:
            diffs.append(f"{name}: only in {'B' if name not in arrays_a else 'A'}")
            continue
        x, y = arrays_a[name], arrays_b[name]
        if x.shape != y.shape or x.dtype != y.dtype:
            diffs.append(f"{name}: {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
        elif not np.array_equal(x[...], y[...], equal_nan=x.dtype.kind == "f"):
            diffs.append(f"{name}: values differ")
    attrs_a, attrs_b = _groups_attrs(a), _groups_attrs(b)
    for name in sorted(set(attrs_a) & set(attrs_b)):
        if attrs_a[name] != attrs_b[name]:
            keys = sorted(k for k in set(attrs_a[name]) | set(attrs_b[name])
                          if attrs_a[name].get(k) != attrs_b[name].get(k))  # fmt: skip
            diffs.append(f"{name} attrs differ: {keys}")
    ck_a, ck_b = _checkpoints(a), _checkpoints(b)
    for name in sorted(set(ck_a) | set(ck_b)):
        if name not in ck_a or name not in ck_b:
            diffs.append(f"checkpoint {name}: only in {'B' if name not in ck_a else 'A'}")
            continue
        for key in sorted(set(ck_a[name]) | set(ck_b[name])):
            x, y = ck_a[name].get(key), ck_b[name].get(key)
            if x is None or y is None or x.shape != y.shape or not torch.equal(x, y):
                diffs.append(f"checkpoint {name}: {key} differs")
    print(f"{len(arrays_a)} arrays, {len(attrs_a)} attribute sets, "
          f"{sum(len(t) for t in ck_a.values())} checkpoint tensors in {len(ck_a)} checkpoints compared")
    for d in diffs:
        print("DIFF", d)
    if not ck_a:
        print("nothing to compare in A: did `run` finish?")
        return 1
    print("identical" if not diffs else f"{len(diffs)} differences")
    return 1 if diffs else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--no-demo", dest="demo", action="store_false", help="only the training runs")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "run":
        run(args.out, demo=args.demo)
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
