#!/usr/bin/env bash
# The Python package's tests (tests/python) against the daemon built at build/server/cakegradd,
# which the tests start with --backend=host on a temporary socket.
#
# Installs what they need from PyPI into a virtual environment kept between runs
# (CAKEGRAD_PY_VENV, default ~/.cache/cakegrad/python-venv): torch (PyPI's default Linux wheel,
# the CUDA build: about 5.4 GB installed, ~2 minutes here; CPU-only wheels are not on PyPI and
# the tests need only its CPU side), numpy, ml_dtypes (numpy bfloat16), grpcio, protobuf,
# pytest. Then generates the protobuf code (client/python/generate_proto.sh), installs the
# package in editable mode and runs pytest. Fails when pytest fails or runs no test.
#
#   CAKEGRAD_DAEMON=/path/to/cakegradd tools/ci/python_tests.sh [pytest args...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$PWD
venv=${CAKEGRAD_PY_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/cakegrad/python-venv}
export CAKEGRAD_DAEMON=${CAKEGRAD_DAEMON:-$repo/build/server/cakegradd}

if [ "$CAKEGRAD_DAEMON" != fake ] && [ ! -x "$CAKEGRAD_DAEMON" ]; then
  echo "python_tests.sh: no daemon binary at $CAKEGRAD_DAEMON: build it first" \
       "(cmake --build build --target cakegradd) or set CAKEGRAD_DAEMON" >&2
  exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
py="$venv/bin/python"
start=$SECONDS
nice "$py" -m pip install --quiet --disable-pip-version-check \
  torch numpy ml_dtypes grpcio protobuf pytest
PYTHON=$py client/python/generate_proto.sh
nice "$py" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  -e client/python
versions=$("$py" -c 'import torch, numpy, grpc, google.protobuf as pb
print(f"torch {torch.__version__}, numpy {numpy.__version__}, grpcio {grpc.__version__}, "
      f"protobuf {pb.__version__}")')
echo "python deps ready in $((SECONDS - start)) s: $versions"

set +e
"$py" -m pytest tests/python -q -rfEsx -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "python_tests.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
