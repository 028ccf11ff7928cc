#!/usr/bin/env bash
# Call mhc100 (forty-first session): forward_prepare's cluster exchange. diag98 / diag99 found the
# with-U kernel's stage bound by its exchange, not by its work: with no MMAs at all it still takes
# 2.67 us a stage (nomma), 2.5 with the X buffer also refilled right after its MMAs
# (early_nomma), against the split-K kernel's 2.1. Variants (same sums in the same order: same bits):
#   mbar:    the exchange on remote mbarriers (branch mhc-mbar-exchange, e927936): the MMA warps
#            announce their CTA sums of stage s to every CTA's U warps (sum_full, release at
#            cluster scope), the U warps hand each cpart parity back once summed (sum_empty);
#            neither group waits for the other group's slowest CTA (main: one cluster barrier a
#            stage for both groups of all 16 CTAs)
#   v4:      main's cluster barrier, the U warps' cluster sums 4 tokens (own tokens: 2) a remote
#            load: 960 remote requests a stage instead of 3,200 (mhc86 put the 3,200 at ~7.5%)
#            (branch mhc-v4only)
#   mbar_v4: both (branch mhc-mbar-exchange, 84ad937)
# Build (main fc13df8):
#   EXTRA=bench/results/raw-2026-12-02-s41/mhc100/run.sh bash tools/gpu/build_ab_carry.sh mhc100 mhc
#   "kernels/cuda/mhc_forward.cu kernels/cuda/cluster_sync.cuh kernels/cuda/kda_mma.cuh
#   kernels/cuda/mhc_common.cuh" base=git:fc13df8 mbar=git:e927936 v4=git:mhc-v4only mbar_v4=git:84ad937
# Device call: {"command": "bash bench/results/raw-2026-12-02-s41/mhc100/run.sh", "carry": [".carry/mhc100x"]}
ROUNDS=3 HIDE='backward_\|forward_finish' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc100 \
  "base mbar v4 mbar_v4" "mbar_v4" 0 4096,16384 'MhcFwdCluster' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|DRAM|rc=|ERROR|error|hazard"
