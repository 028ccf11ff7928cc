#!/usr/bin/env bash
# As run on the GPU machine (thirty-eighth session, call 4): candidate "rn" (branch kda-dkdec-rn:
# dKdec's 16-wide steps into fresh accumulators, added rounding to nearest) against "base" (main).
# Carry built by
#   bash tools/gpu/build_ab_carry.sh kda106 kda kernels/cuda/kda_chunked_backward.cu base=git:main rn=tree
# 1. tools/gpu/kda_ab_call.sh: hash gate (KEEP=1), 2 alternating bench rounds, no suite, no ncu;
# 2. the fast-decay dA_log draws on rn, seeds as call 1 (100000+ and 90000+ at 4 heads, 110000+
#    at 8), three at once.
set -u
tar xJf .carry/kda106x/kda106.tar.xz -C .carry
NCU_UNTIL=0 bash tools/gpu/kda_ab_call.sh .carry/kda106 "base rn" 2 "" 1 2>&1 | tee "$OUT/ab_call.txt" | tail -20
B=$PWD/.carry/kda106/rn/cakegrad_gpu_kda_tests
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
L=${DRAW_S:-110}
LIMIT_S=$L bash tools/gpu/kda_draws_call.sh "$B" $F/B2_T1000_H4_fastdecay 2000 100000 > "$OUT/d4_100k.txt" 2>&1 &
LIMIT_S=$L bash tools/gpu/kda_draws_call.sh "$B" $F/B2_T1000_H4_fastdecay 2000 90000 > "$OUT/d4_90k.txt" 2>&1 &
LIMIT_S=$L bash tools/gpu/kda_draws_call.sh "$B" $F/B2_T1000_H8_fastdecay 2000 110000 > "$OUT/d8_110k.txt" 2>&1 &
wait
cat "$OUT"/d*.txt
mkdir -p "$OUT/logs" && cp -r "${OUT}"/draws "$OUT/logs/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT/logs" . && rm -rf "$OUT/logs" "$OUT/draws"
