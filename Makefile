# anonymask: `make demo` and `make test` are all a fresh clone needs.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
TORCH ?= cpu
DATASET ?= demo
EPS ?=
TRAIN_EXTRA ?=
STAMP := $(VENV)/.setup-stamp
export PYOPENGL_PLATFORM ?= egl
export ANONYMASK_DATA ?= $(CURDIR)/data

.PHONY: setup demo test test-slow lint bench gpu-check serve clean \
        train-nonprivate train-dp train-maskdp train-fpdp train-skeleton-anon

setup: $(STAMP)

$(STAMP): scripts/setup.sh pyproject.toml requirements/base.txt requirements/constraints.txt requirements/nodeps.txt requirements/agpl.txt
	TORCH=$(TORCH) bash scripts/setup.sh
	$(PY) -c "from anonymask.cli.prefect_startup import ready_for_flows; ready_for_flows()"
	touch $(STAMP)

demo: setup
	$(PY) -m anonymask.cli demo

test: setup
	$(PY) -m pytest -q

test-slow: setup
	$(PY) -m pytest -q -m slow

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	$(PY) -m anonymask.cli bench --out bench-results

# No setup: runs on the Python whose torch sees a CUDA GPU, wheels from .whl/ if any (scripts/gpu_check.sh)
GPU_CHECK_ARGS ?=
gpu-check:
	bash scripts/gpu_check.sh $(GPU_CHECK_ARGS)

serve: setup
	bash scripts/serve.sh

TRAIN_ARGS = --dataset $(DATASET) $(if $(EPS),--epsilon $(EPS),) $(TRAIN_EXTRA)
train-nonprivate: setup
	$(PY) -m anonymask.cli train --mode nonprivate $(TRAIN_ARGS)
train-dp: setup
	$(PY) -m anonymask.cli train --mode dp $(TRAIN_ARGS)
train-maskdp: setup
	$(PY) -m anonymask.cli train --mode maskdp $(TRAIN_ARGS)
train-fpdp: setup
	$(PY) -m anonymask.cli train --mode fpdp $(TRAIN_ARGS)
train-skeleton-anon: setup
	$(PY) -m anonymask.cli train-skeleton-anon --dataset $(DATASET) $(TRAIN_EXTRA)

clean:
	rm -rf $(VENV) data/demo data/stores/demo.zarr bench-results
