#!/usr/bin/env bash
# Call mhc86 (DIAGNOSTIC, timing only): what bounds forward_prepare's cluster kernel (3.1 us a
# 32-token stage against the split-K kernel's 2.2 us; 1.46x its floor, target 1.2x). Four variants
# of kernels/cuda/mhc_forward.cu, each wrong in U or stats by design (branches diag-fwd-*, diffs
# beside this script):
#   early: the U warps refill the X buffer before they compute U from it (after pre), not after;
#   lead:  the MMA warps refill each X buffer right after their multiply, as the split-K kernel
#          does (the ring's lead of ~2 stages instead of ~1); the U warps read whatever is there;
#   nou:   no U at all (pre, the barriers and the refill after them stay);
#   local: the cluster sum reads 16 values of the CTA's own shared memory, not one of each rank
#          (no DSMEM; the cluster barriers stay).
# Carry: bash tools/gpu/build_ab_carry.sh mhc86 mhc "kernels/cuda/mhc_forward.cu" base=git:main
#   early=git:diag-fwd-early nou=git:diag-fwd-nou local=git:diag-fwd-local lead=git:diag-fwd-lead
# Device call: {"command": "bash bench/results/raw-2026-12-02-s36/mhc86/run.sh",
#   "carry": [".carry/mhc86x"], "timeout_s": 480}
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc86 "base early lead nou local" "" 1 4096,16384 \
  'MhcFwdCluster' 2>&1 | grep -E "PASSED|FAILED|hashes|Duration|Throughput|rc=|MhcFwd|done"
tar xzf "${OUT:-/tmp/out}/mhc86.tgz" -O ./ab/summary.txt | grep -E "forward_(prepare|stats)|copy"
