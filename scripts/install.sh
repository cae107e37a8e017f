#!/usr/bin/env bash
# Installs everything sparsescope needs on a fresh Debian/Ubuntu machine with Python >= 3.10:
# the pinned CPU PyTorch first (an unpinned torch would pull several GB of CUDA packages),
# then sparsescope itself (non-editable) with its test extras, then Debian's headless Chromium
# (chromium-headless-shell) for the browser tests. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
echo "==> PyTorch (pinned CPU build)"
$PY -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
echo "==> sparsescope and its dependencies"
$PY -m pip install --quiet --disable-pip-version-check ".[test]"
# The headless build: the browser tests take about a quarter less CPU on it than on the full
# chromium, which they fall back to (tests/browser/conftest.py).
if ! command -v chromium-headless-shell >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> chromium-headless-shell (Debian) for the browser tests"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        chromium-headless-shell >/dev/null; } \
      || echo "note: could not install chromium-headless-shell; the browser tests use chromium if it is installed" >&2
  elif ! command -v chromium >/dev/null 2>&1; then
    echo "note: no chromium; browser tests will be skipped (apt-get install chromium-headless-shell)" >&2
  fi
fi
echo "==> compiled kernels and shipped models, built now rather than at the first start"
# The tests import this checkout's modules, not the installed copy (tests/checkout.py), and numba
# keeps a module's compiled kernels beside its source: in a source checkout those are compiled
# too, side by side with the installed copy's, so that the first test run does not wait for them.
warming=()
if [ -f tests/conftest.py ]; then
  for module in sparse_core.entmax.cpu sparse_core._method_kernels; do
    "$PY" -c "import $module as k; k.warm()" >/dev/null 2>&1 & warming+=($!)
  done
fi
# from outside the checkout: `python -m` puts the working directory first on sys.path, and from
# here it would import (and compile the kernels of) this folder's sparse_core, not the installed one
(cd / && "$PY" -m sparsescope.cli prepare)
for pid in "${warming[@]}"; do
  wait "$pid" || echo "note: this checkout's kernels did not compile now; the tests compile them" >&2
done
echo "==> done: run 'sparsescope' to start the app, 'python3 -m pytest' to run the tests"
