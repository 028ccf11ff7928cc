#!/usr/bin/env bash
# Call mhc89, two diagnostics in one call (timing only, wrong results by design):
# 1. forward_prepare: where push3's exchange latency sits (mhc88: push3 = main's time, where
#    mhc86's `local` was -7.5%). push4: push3 without the owners' wait for the pushed partials;
#    push5: push4, and the U warps without their wait for the gathered sums (branches
#    diag-fwd-push4 / diag-fwd-push5; push4_on_push3.diff, push5_on_push4.diff; push3 is
#    mhc88's push3.diff).
# 2. KDA: ncu time of every chunked-backward kernel at case 0 (1, 8192, 32) for kda103's base,
#    x1 and x0 (which kernels the split products' cost sits in).
# Carry: bash tools/gpu/build_ab_carry.sh mhc89 mhc "kernels/cuda/mhc_forward.cu
#   kernels/cuda/cluster_sync.cuh kernels/cuda/mhc_common.cuh" base=git:main
#   push3=git:mhc-fwd-push3 push4=git:diag-fwd-push4 push5=git:diag-fwd-push5
#   (and kda103's carry, as kda103/run.sh says)
# Device call: {"command": "bash bench/results/raw-2026-12-02-s36/mhc89/run.sh",
#   "carry": [".carry/mhc89x", ".carry/kda103x"], "timeout_s": 480}
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc89 "base push3 push4 push5" "" 1 16384 \
  'MhcFwdCluster' 2>&1 | grep -E "Duration|done|Fwd" |
  sed 's/void unnamed>::MhcFwdClusterKernel<unnamed>::FwdClusterTraits<4>, \([01]\)>.*/cluster<\1>/'
tar xzf "${OUT:-/tmp/out}/mhc89.tgz" -O ./ab/summary.txt | grep -E "forward_prepare|copy"
tar xJf .carry/kda103x/kda103.tar.xz -C .carry
source tools/gpu/ab_extras.sh
ab_call kda103n
AB_NCU_UNTIL=200 ab_ncu_kernels .carry/kda103 "base x1 x0" 0
cp "$AB_OUT/ncu_summary.txt" "${OUT:-/tmp/out}/kda103_ncu_summary.txt"
