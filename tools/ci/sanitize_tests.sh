#!/usr/bin/env bash
# The CPU suites and the Python tests again, against a build with AddressSanitizer (leaks
# included) and UndefinedBehaviorSanitizer in every host C++ target, the daemon included: a
# client's bad request must not reach undefined behaviour in the daemon, which a plain build can
# pass by luck (this found a dangling string_view in --workspace_for's parsing and a signed
# overflow in the stride check, 2026-12-02). CUDA is off here; compute-sanitizer covers the
# kernels on the GPU machine. Builds into build-asan/ (BUILD_DIR to change); ~8 minutes on two
# cores from scratch. Run by .ci/run after the README's test command.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dir=${BUILD_DIR:-build-asan}
BUILD_DIR=$dir bash scripts/build.sh -DCAKEGRAD_ENABLE_CUDA=OFF \
  -DCAKEGRAD_SANITIZE=address,undefined
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== ctest (ASan + UBSan)"
ctest --test-dir "$dir" --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900
echo "== python tests against the sanitized daemon"
CAKEGRAD_DAEMON="$PWD/$dir/server/cakegradd" bash tools/ci/python_tests.sh
