#!/usr/bin/env bash
# Creates .venv and installs every pinned dependency in the order STACK.md verified:
# torch first, then everything else under a constraints file so nothing swaps torch for a
# CUDA build, then the few packages that must go in without their dependencies.
#
#   TORCH=cpu  (default) install torch==2.13.0 (the CPU wheel on these machines)
#   TORCH=keep use the torch already installed in the base Python (CUDA machines): the venv
#              sees system site-packages and the constraints pin that torch/torchvision.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH=${TORCH:-cpu}
VENV=.venv

apt_need=()
# EGL for offscreen rendering; chromium renders the preview page in its test.
for pkg in libegl1 libegl-mesa0 libgl1-mesa-dri libgl1 libglib2.0-0 chromium; do
  dpkg -s "$pkg" >/dev/null 2>&1 || apt_need+=("$pkg")
done
if [ ${#apt_need[@]} -gt 0 ]; then
  echo "setup: apt-get install ${apt_need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${apt_need[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  if [ "$TORCH" = keep ]; then
    "$PYTHON" -m venv --system-site-packages "$VENV"
  else
    "$PYTHON" -m venv "$VENV"
  fi
fi
PIP="$VENV/bin/python -m pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1

CONSTRAINTS=requirements/constraints.txt
if [ "$TORCH" = keep ]; then
  TV=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')
  CONSTRAINTS=$VENV/constraints-keep.txt
  grep -v '^torch' requirements/constraints.txt > "$CONSTRAINTS"
  echo "torch==$TV" >> "$CONSTRAINTS"
  "$VENV/bin/python" -c 'import torchvision; print("torchvision==" + torchvision.__version__.split("+")[0])' \
    >> "$CONSTRAINTS" 2>/dev/null || true
  grep -v '^torchvision' requirements/base.txt > "$VENV/base-keep.txt"
  BASE=$VENV/base-keep.txt
else
  $PIP install -q "torch==2.13.0"
  BASE=requirements/base.txt
fi
export PIP_CONSTRAINT=$PWD/$CONSTRAINTS
$PIP install -q -r "$BASE"
$PIP install -q --no-deps -r requirements/nodeps.txt
$PIP install -q --no-deps -r requirements/agpl.txt
$PIP install -q --no-deps -e .
echo "setup: done ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
