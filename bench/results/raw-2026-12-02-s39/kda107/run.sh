#!/usr/bin/env bash
# As run on the GPU machine (thirty-ninth session): candidate "poly" (branch kda-unbiased-sfu:
# every ex2.approx of the chunked KDA kernels replaced by a degree-6 polynomial 2^y with a mean
# error of +0.016 ulp, the q / k norms by IEEE 1 / sqrtf) against "base" (main). The question: is
# the fast-decay dA_log tail the SFU's one-sided ex2 error (tools/gpu/probes/sfu_bias_probe.cu)?
# Carry built by
#   bash tools/gpu/build_ab_carry.sh kda107 kda "kernels/cuda/kda_common.cuh kernels/cuda/kda_mma.cuh kernels/cuda/kda_chunked_forward.cu kernels/cuda/kda_chunked_backward.cu" base=git:main poly=tree
# 1. tools/gpu/kda_ab_call.sh: hash gate (KEEP=1: new bits by design), 2 alternating bench rounds,
#    poly's KDA suite with memcheck only, worst FP32 gradients, no ncu;
# 2. the fast-decay dA_log draws, paired: the same seeds (100000+) on base and poly at 4 and 8
#    heads, four processes at once (tools/gpu/ab_extras.sh ab_paired_tails).
set -u
tar xJf .carry/kda107x/kda107.tar.xz -C .carry
SANITIZE_TOOLS=memcheck NCU_UNTIL=0 bash tools/gpu/kda_ab_call.sh .carry/kda107 "base poly" 2 "poly" 1 2>&1 |
  tee "$OUT/ab_call.txt" | tail -40
export AB_OUT=$OUT/tails
source tools/gpu/ab_extras.sh
AB_TAIL_TIMEOUT=${DRAW_S:-140} ab_paired_tails .carry/kda107 "base poly" \
  "B2_T1000_H4_fastdecay B2_T1000_H8_fastdecay" 2000 100000
mkdir -p "$OUT/logs" && cp -r "${OUT}"/ab "$OUT/logs/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT/logs" . && rm -rf "$OUT/logs"
