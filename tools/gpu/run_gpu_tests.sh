#!/usr/bin/env bash
# Runs ON the GPU machine (device tool), from the repo root, with .carry/ carried
# (tools/gpu/prepare_carry.sh fills it here first):
#   bash tools/gpu/run_gpu_tests.sh FAMILY [GTEST_FILTER]      FAMILY: conv1d | mhc | kda | all
#   BENCH=1 ...  also runs bench/kernels/FAMILY_bench after the tests
#   SANITIZE=1 ... also runs compute-sanitizer on tests matching *Sanitize*, one run a tool of
#                  SANITIZE_TOOLS (default: sanitize_tools.sh, all four)
# Builds only that family's targets (kernels-only: no gRPC needed), writes every log under $OUT.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/sanitize_tools.sh"  # SANITIZE_TOOLS
OUT=${OUT:-/tmp/cakegrad-out}
mkdir -p "$OUT"
FAMILY=${1:?family: conv1d | mhc | kda | all}
FILTER=${2:-*}
FAMILIES=$FAMILY
[ "$FAMILY" = all ] && FAMILIES="conv1d mhc kda"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "command: bash tools/gpu/run_gpu_tests.sh $* (BENCH=${BENCH:-0} SANITIZE=${SANITIZE:-0})"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  nvcc --version | tail -1
} | tee "$OUT/env.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAKEGRAD_KERNELS_ONLY=ON \
  -DCAKEGRAD_GTEST_SOURCE_DIR="$PWD/.carry/googletest" > "$OUT/configure.log" 2>&1 \
  || { tail -50 "$OUT/configure.log"; exit 1; }
targets=""
for f in $FAMILIES; do
  targets="$targets cakegrad_gpu_${f}_tests"
  [ "${BENCH:-0}" = 1 ] && targets="$targets cakegrad_${f}_bench"
done
cmake --build build-gpu -j "$(nproc)" --target $targets > "$OUT/build.log" 2>&1 \
  || { grep -E "error" -A3 "$OUT/build.log" | head -80; exit 1; }
echo "build ok:$targets"
rc=0
for f in $FAMILIES; do
  bin=./build-gpu/tests/cakegrad_gpu_${f}_tests
  "$bin" --gtest_filter="$FILTER" > "$OUT/gpu_${f}_tests.log" 2>&1 || rc=1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[       OK \]|Failure|Expected|Which is|rel|error" \
    "$OUT/gpu_${f}_tests.log" | head -120
  if [ "${SANITIZE:-0}" = 1 ]; then
    for tool in $SANITIZE_TOOLS; do
      compute-sanitizer --tool $tool --error-exitcode 9 "$bin" --gtest_filter='*Sanitize*' \
        > "$OUT/sanitize_${f}_${tool}.log" 2>&1 || rc=1
      tail -3 "$OUT/sanitize_${f}_${tool}.log"
    done
  fi
  if [ "${BENCH:-0}" = 1 ]; then
    echo "== bench $f"
    "./build-gpu/bench/cakegrad_${f}_bench" 2>&1 | tee "$OUT/bench_${f}.txt" || rc=1
  fi
done
exit $rc
