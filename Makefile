# anonymask: `make demo` and `make test` are all a fresh clone needs.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
TORCH ?= cpu
DATASET ?= demo
EPS ?= 
STAMP := $(VENV)/.setup-stamp
export PYOPENGL_PLATFORM ?= egl
export ANONYMASK_DATA ?= $(CURDIR)/data

.PHONY: setup demo test test-slow lint bench serve clean \
        train-nonprivate train-dp train-maskdp train-fpdp

setup: $(STAMP)

$(STAMP): scripts/setup.sh pyproject.toml requirements/base.txt requirements/constraints.txt requirements/nodeps.txt
	TORCH=$(TORCH) bash scripts/setup.sh
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

clean:
	rm -rf $(VENV) data/demo data/stores/demo.zarr bench-results
