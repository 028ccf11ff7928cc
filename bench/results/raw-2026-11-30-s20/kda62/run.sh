#!/usr/bin/env bash
# kda62 (twentieth session): the checkpoint S0 and the gate sums made about FP32-exact, for the
# dA_log tail of the chunked backward. base = main; s0g = the working tree at the call: the
# checkpoint preparation writes a third BF16 part of Kdec^T (kda_layout's kdt3 region) and sums
# its log-gates in FP64; the checkpoint state pass splits U^T in three and multiplies U^T Kdec in
# BF16x6; the grad kernel sums its log-gates in FP64. The forward's instances are unchanged
# (their SASS equal but for parameter offsets). Steps: 120 paired dA_log draws at both tail shapes,
# the hash gate (forward record hashes must stay equal, backward ones change), 3 alternating
# chunked-only bench rounds, the suite + memcheck + racecheck on s0g, ncu per-kernel times of
# one backward at each bench shape.
# Build here: EXTRA=bench/results/raw-2026-11-30-s20/kda62/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda62 kda "kernels/cuda/kda_chunked_forward.cu kernels/cuda/kda_chunked_backward.cu
#   kernels/cuda/kda_mma.cuh kernels/cuda/kda_common.cuh kernels/reference/kda_layout.h" \
#   base=git:main s0g=tree
# Device call: {"command": "tar xJf .carry/kda62x/kda62.tar.xz -C .carry && bash .carry/kda62/run.sh",
#   "carry": [".carry/kda62x"], "timeout_s": 480}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda62
AB_TAIL_TIMEOUT=200 ab_paired_tails $D "base s0g" "B2_T65_H1 B2_T1000_H4_fastdecay" 120 20200000
echo "== tails at $(ab_el) s"; ab_pack
# The worst draws of each shape again, s0g beside the sequential backward on the same inputs
# (KDA_PAIR_SEQUENTIAL=1): a draw bad on both belongs to the problem's conditioning.
for tag in B2_T65_H1 B2_T1000_H4_fastdecay; do
  for seed in $(sort -k3 -g "$AB_OUT/paired_$tag.txt" | tail -5 | awk '{print $1}' | sed 's/.*=//'); do
    env KDA_TEST_SEED=$seed KDA_PAIR_SEQUENTIAL=1 timeout 60 $D/s0g/cakegrad_gpu_kda_tests \
      --gtest_filter="Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/$tag" 2>&1 |
      grep -E "dA_log" | sed "s/^/$tag seed $seed: /"
  done
done | tee "$AB_OUT/pair_sequential.txt"
echo "== pairs at $(ab_el) s"; ab_pack
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
  HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison:KdaKernels.ForwardRecordHashesForCrossBuildComparison' \
  HASH_KEEP=1 timeout 240 bash tools/gpu/ab_bench.sh $D kda "base s0g" 3 "s0g" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
for v in base s0g; do
  for c in 0 1 2; do
    [ "$(ab_el)" -lt 420 ] || break
    KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=$c timeout 60 ncu --metrics gpu__time_duration.sum \
      -k regex:KdaChunk -c 12 "$D/$v/cakegrad_kda_bench" > "$AB_OUT/ncu_kernels_${v}_$c.txt" 2>&1
    echo "ncu $v case $c:"; grep -E "KdaChunk|gpu__time_duration" "$AB_OUT/ncu_kernels_${v}_$c.txt" |
      sed -E 's/\(.*//' | paste - - | awk '{print "  " $1, $(NF)}'
  done
done | tee -a "$AB_OUT/ncu_summary.txt"
ab_pack; echo "== done at $(ab_el) s"
