#!/usr/bin/env bash
# Call mhc102 (forty-first session): forward_prepare's mbarrier exchange with more cpart parities
# (branch mhc-mbar3). mhc100's mbar kept two parities, so the exchange's chain (CTA sum, hand-over,
# 16 remote loads, hand-back) still spanned two stages, as with the split cluster barrier. Here the
# MMA warps may run kParities - 1 stages ahead of the slowest CTA's U warps. The shared memory
# comes from wpart: the two warps of a stream add their partials into one slot (shared atomic adds
# onto zeros, each CTA sum zeroing what it read; two addends, so the order cannot change the sum),
# which gives stats new bits in both forwards alike (KEEP=1; the suite checks accuracy and that
# forward_stats' stats equal forward_prepare's).
#   pair2: the slots halved, two parities (what the slots' atomics cost alone)
#   mbar3: three parities (mhc-mbar3 HEAD)
#   mbar4: four parities
# Build (main fc13df8; mhc-mbar3 is e927936 plus one commit):
#   git checkout mhc-mbar3
#   sed 's/kParities = 3;/kParities = 4;/' kernels/cuda/mhc_forward.cu > /tmp/diag/mbar4.cu (and = 2; for pair2)
#   EXTRA=bench/results/raw-2026-12-02-s41/mhc102/run.sh bash tools/gpu/build_ab_carry.sh mhc102 mhc
#   kernels/cuda/mhc_forward.cu base=git:fc13df8 pair2=/tmp/diag/pair2.cu mbar3=tree
#   mbar4=/tmp/diag/mbar4.cu
#   (the branch's cluster_sync.cuh and kda_mma.cuh serve all four; base's kernel uses neither change)
# Device call: {"command": "bash bench/results/raw-2026-12-02-s41/mhc102/run.sh", "carry": [".carry/mhc102x"]}
ROUNDS=3 HIDE='backward_\|forward_finish' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc102 \
  "base pair2 mbar3 mbar4" "mbar3" 1 4096,16384 'MhcFwdCluster' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|DRAM|rc=|ERROR|error|hazard|rel-L2 T=16384"
