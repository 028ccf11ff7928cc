#!/usr/bin/env bash
# Runs ON a GPU machine with two or more GPUs (device kind nvidia-h200-x2), from the repo root,
# with binaries packed here by tools/gpu/package_for_gpu.sh (carry: .carry/gpu.tar.xz and
# client/python/cakegrad/v1). Issue 9's check of one daemon for all GPUs of a node:
#   1. cakegrad_gpu_daemon_tests (the MultiGpu* tests need two GPUs; the rest run on GPU 0)
#   2. one daemon on every GPU; two trainer processes, each alone on its own GPU
#      (two_trainers.py --gpus split), all operators, gradients checked every step; then
#      cakegrad_daemon_bench busy with clients spread over the GPUs (each GPU's busy fraction
#      over one common window)
#   3. the same trainers against a daemon that sees only the first GPU (both on it)
#   4. runs 2 and 3 compared bit for bit (compare_trainer_runs.py)
# Logs go to /tmp/cakegrad-multi-gpu and come back as $OUT/logs.tgz; a summary prints at the end.
#   bash tools/gpu/run_multi_gpu.sh      STEPS (default 10), SKIP="1" skips the C++ tests
set -uo pipefail
# NVLink multicast stays off (the device README: it can take the host's GPUs out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LOG=/tmp/cakegrad-multi-gpu
source tools/gpu/runner_lib.sh
export CAKEGRAD_BENCH="$bin/cakegrad_daemon_bench"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "binaries: $(cat .carry/gpu/SOURCE 2>/dev/null || echo 'unknown source')"
  echo "command: bash tools/gpu/run_multi_gpu.sh (STEPS=${STEPS:-10} SKIP='${SKIP:-}')"
  nvidia-smi -L
  nvidia-smi topo -m 2>/dev/null | head -4
} | tee "$LOG/env.txt" >> "$summary"
gpus=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | tr -d ' ')
first=$(echo "$gpus" | head -1)
if [ "$(echo "$gpus" | wc -l)" -lt 2 ]; then
  note "only one GPU here: the multi-GPU checks need nvidia-h200-x2"
  exit 1
fi

if ! skip 1; then
  timeout 400 "$bin/cakegrad_gpu_daemon_tests" > "$LOG/gpu_daemon_tests.log" 2>&1
  note "daemon tests: rc=$? $(gtest_line "$LOG/gpu_daemon_tests.log")"
  grep -E "^\[  FAILED  \]|^\[  SKIPPED \]" "$LOG/gpu_daemon_tests.log" | head | tee -a "$summary"
fi

OUT="$LOG/split" STEPS=${STEPS:-10} GPUS=split BUSY_BENCH=1 timeout 300 \
  bash tools/gpu/run_python_gpu.sh > "$LOG/split.log" 2>&1
note "split (trainer r on GPU r, one daemon for all): rc=$? $(grep TWO_TRAINERS "$LOG/split.log")"
grep -A6 "^| clients" "$LOG/split/busy.txt" 2>/dev/null | tee -a "$summary"

CUDA_VISIBLE_DEVICES=$first OUT="$LOG/single" STEPS=${STEPS:-10} GPUS=same timeout 300 \
  bash tools/gpu/run_python_gpu.sh > "$LOG/single.log" 2>&1
note "single (both trainers on $first, daemon sees only it): rc=$? $(grep TWO_TRAINERS \
  "$LOG/single.log")"

python3 tests/gpu/python/compare_trainer_runs.py "$LOG/split" "$LOG/single" \
  > "$LOG/compare.txt" 2>&1
note "compare: rc=$?"
cat "$LOG/compare.txt" | tee -a "$summary"
tar czf "$OUT/logs.tgz" -C "$LOG" .
cat "$summary"
