#!/usr/bin/env bash
# `make gpu-check`: prove a CUDA install of anonymask and measure it (bench/gpu_check.py).
#
# Needs no network and no `make setup`: it runs on the first Python here whose torch sees a CUDA GPU
# ($PYTHON, then .venv/bin/python, then python3). Packages that Python lacks can come as wheels in
# .whl/ (pure-Python or matching its version); they are installed into a folder under /tmp, never
# into that Python. If the repository is not installed in it (`pip install -e .`), a folder of
# symbolic links under /tmp lays the package out as pyproject.toml maps it (anonymask.models =
# models/, ...). Without a CUDA GPU: one line, exit 2. Arguments go to `python -m anonymask.bench.gpu_check`
# (--tiny, --out FILE, --copy-to DIR, --only SECTION..., --budget-scale X).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TINY=0
for a in "$@"; do [ "$a" = --tiny ] && TINY=1; done

PY=""
for cand in "${PYTHON:-}" "$ROOT/.venv/bin/python" python3; do
  [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1 || continue
  if [ "$TINY" = 1 ]; then
    "$cand" -c 'import torch' >/dev/null 2>&1 && { PY=$cand; break; }
  elif "$cand" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    PY=$cand; break
  fi
done
if [ -z "$PY" ]; then
  if [ "$TINY" = 1 ]; then echo "gpu-check: no Python with torch found"; exit 1; fi
  echo "gpu-check: no CUDA GPU visible to torch here (nothing measured; \`make gpu-check GPU_CHECK_ARGS=--tiny\` runs the toy-size check on CPU)"
  exit 2
fi
PY=$(command -v "$PY")

# carried wheels, for a Python that is not the project's venv (which has them all already)
shopt -s nullglob
wheels=("$ROOT"/.whl/*.whl)
if [ ${#wheels[@]} -gt 0 ] && [ "$PY" != "$ROOT/.venv/bin/python" ]; then
  SITE=${GPU_CHECK_SITE:-/tmp/anonymask-gpu-check-site}
  if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
      --upgrade --target "$SITE" "${wheels[@]}" >/tmp/anonymask-gpu-check-pip.log 2>&1; then
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    echo "gpu-check: ${#wheels[@]} wheels from .whl/ installed into $SITE"
  else
    echo "gpu-check: warning: installing .whl/ failed (see /tmp/anonymask-gpu-check-pip.log); sections that need them will say so"
  fi
fi

RUN_DIR=$ROOT
if ! "$PY" -c 'import anonymask.bench.action, anonymask.storage' >/dev/null 2>&1; then
  # not installed: lay the package out as pyproject.toml's package-dir does, with links to the checkout
  SHIM=$(mktemp -d /tmp/anonymask-shim.XXXXXX)
  mkdir "$SHIM/anonymask"
  for f in "$ROOT"/anonymask/*; do ln -s "$f" "$SHIM/anonymask/$(basename "$f")"; done
  # every "anonymask.<x>" = "<folder>" line of pyproject.toml's package-dir
  for d in $(sed -n 's/^"anonymask\.\([a-z_]*\)" = "\([a-z_]*\)"$/\2/p' "$ROOT/pyproject.toml"); do
    ln -s "$ROOT/$d" "$SHIM/anonymask/$d"
  done
  export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
  RUN_DIR=$SHIM  # not the checkout: its anonymask/ folder would hide the links
fi
cd "$RUN_DIR" && exec "$PY" -m anonymask.bench.gpu_check "$@"
