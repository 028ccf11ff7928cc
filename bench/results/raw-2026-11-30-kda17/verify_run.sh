#!/usr/bin/env bash
# kda17 follow-up (never run): kda-s17 e62580c's suite binary, the new 16-row determinism test (the
# cluster forward through runs, garbage workspaces, streams and graph replay) and the hash lines.
#   run: {"command": "bash .carry/kda17v/run.sh", "carry": [".carry/kda17v"], "timeout_s": 60}
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
timeout 50 .carry/kda17v/cakegrad_gpu_kda_tests \
  --gtest_filter='KdaKernels.BitwiseDeterministic*:KdaKernels.ForwardRecordHashes*' 2>&1 | tee "$out/kda17v.log" | \
  grep -E "kda hashes|OK \]|FAILED|PASSED"
echo "rc=${PIPESTATUS[0]}"
