#!/usr/bin/env bash
# The README's second command, and what CI runs: installs dependencies, builds, runs every
# GoogleTest suite under ctest (GPU tests skip with a message when no GPU is visible), the
# Python package's tests against a real daemon, and the deployment checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
echo "== ctest"
ctest --test-dir build --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900
if [ -x tools/ci/python_tests.sh ] || [ -f tools/ci/python_tests.sh ]; then
  echo "== python tests"
  bash tools/ci/python_tests.sh
fi
if [ -f tools/ci/check_deploy.sh ]; then
  echo "== deployment checks"
  bash tools/ci/check_deploy.sh
fi
