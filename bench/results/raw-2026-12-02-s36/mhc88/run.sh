#!/usr/bin/env bash
# Call mhc88: mhc87's push form was bitwise main's and clean but 27% slower (forward_prepare
# 0.2313 -> 0.2943 ms): its U warps waited for cluster phase s + 1 before U of stage s, i.e. for
# every CTA's stage-s sums, which held back U and the X refill. push2 moves the U warps' barrier
# after U and the refill; push3 also sums stage s's own tokens before pushing stage s + 1.
# Branches mhc-fwd-push (push2 on top of mhc87's push) and mhc-fwd-push3; push2.diff, push3.diff.
# Carry: bash tools/gpu/build_ab_carry.sh mhc88 mhc "kernels/cuda/mhc_forward.cu
#   kernels/cuda/cluster_sync.cuh kernels/cuda/mhc_common.cuh" base=git:main
#   push2=git:mhc-fwd-push push3=git:mhc-fwd-push3
# Device call: {"command": "bash bench/results/raw-2026-12-02-s36/mhc88/run.sh",
#   "carry": [".carry/mhc88x"], "timeout_s": 480}
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc88 "base push2 push3" "push2 push3" 0 4096,16384 \
  'MhcFwdCluster' 2>&1 | grep -E "PASSED|FAILED|SUMMARY|hashes|Duration|Throughput|rc=|done|Fwd"
timeout 200 compute-sanitizer --tool synccheck --error-exitcode 9 \
  .carry/mhc88/push3/cakegrad_gpu_mhc_tests --gtest_filter='*Sanitize*' > /tmp/synccheck.log 2>&1
echo "synccheck rc=$?"; tail -3 /tmp/synccheck.log; cp /tmp/synccheck.log "${OUT:-/tmp/out}/"
tar xzf "${OUT:-/tmp/out}/mhc88.tgz" -O ./ab/summary.txt | grep -E "forward_(prepare|stats)|copy"
tar xzf "${OUT:-/tmp/out}/mhc88.tgz" -O ./ab/hash_gate.txt
