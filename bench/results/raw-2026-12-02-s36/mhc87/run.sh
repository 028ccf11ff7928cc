#!/usr/bin/env bash
# Call mhc87: forward_prepare's cluster kernel with its cluster sums pushed (st.async on
# mbarriers: each CTA sends each token pair's CTA sums to the pair's owner, which sums the 16 in
# rank order and sends z_0..3 and sq of its two tokens to every CTA) instead of 16 DSMEM loads per
# value in every CTA (mhc86's `local` diagnostic: -7.5% without those loads). Branch
# mhc-fwd-push, push.diff. Every output should be main's bits (the same sums in the same order).
# Carry: bash tools/gpu/build_ab_carry.sh mhc87 mhc "kernels/cuda/mhc_forward.cu
#   kernels/cuda/cluster_sync.cuh kernels/cuda/mhc_common.cuh" base=git:main push=git:mhc-fwd-push
# Device call: {"command": "bash bench/results/raw-2026-12-02-s36/mhc87/run.sh",
#   "carry": [".carry/mhc87x"], "timeout_s": 480}
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc87 "base push" "push" 0 4096,16384 \
  'MhcFwdCluster' 2>&1 | grep -E "PASSED|FAILED|SUMMARY|hashes|Duration|Throughput|rc=|done|Fwd"
timeout 200 compute-sanitizer --tool synccheck --error-exitcode 9 \
  .carry/mhc87/push/cakegrad_gpu_mhc_tests --gtest_filter='*Sanitize*' > /tmp/synccheck.log 2>&1
echo "synccheck rc=$?"; tail -3 /tmp/synccheck.log; cp /tmp/synccheck.log "${OUT:-/tmp/out}/"
tar xzf "${OUT:-/tmp/out}/mhc87.tgz" -O ./ab/summary.txt | grep -E "forward_(prepare|stats)|copy"
tar xzf "${OUT:-/tmp/out}/mhc87.tgz" -O ./ab/hash_gate.txt
