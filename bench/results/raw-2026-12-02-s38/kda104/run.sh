#!/usr/bin/env bash
# As run on the GPU machine (thirty-eighth session, call 1): candidate "dec" (the grad kernel's
# decays as quotients of exactly made E_t = exp(G_t - r_J)) against "base" (main). Carry built by
#   bash tools/gpu/build_ab_carry.sh kda104 kda kernels/cuda/kda_chunked_backward.cu base=git:main dec=tree
# 1. tools/gpu/kda_ab_call.sh: hash gate (KEEP=1: new bits by design), 3 alternating bench rounds,
#    dec's KDA suite and its sanitizers, worst FP32 gradients, ncu of the grad kernel;
# 2. the fast-decay dA_log draws on dec, on the seeds of the thirty-seventh session's calls 4 and 5
#    (90000+, 100000+ at 4 heads, 110000+ at 8), three at once.
set -u
tar xJf .carry/kda104x/kda104.tar.xz -C .carry
NCU_UNTIL=${NCU_UNTIL:-300} bash tools/gpu/kda_ab_call.sh .carry/kda104 "base dec" 3 "dec" 1 2>&1 |
  tee "$OUT/ab_call.txt" | tail -60
B=$PWD/.carry/kda104/dec/cakegrad_gpu_kda_tests
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
L=${DRAW_S:-150}
LIMIT_S=$L bash tools/gpu/kda_draws_call.sh "$B" $F/B2_T1000_H4_fastdecay 2000 100000 > "$OUT/d4_100k.txt" 2>&1 &
LIMIT_S=$L bash tools/gpu/kda_draws_call.sh "$B" $F/B2_T1000_H4_fastdecay 2000 90000 > "$OUT/d4_90k.txt" 2>&1 &
LIMIT_S=$L bash tools/gpu/kda_draws_call.sh "$B" $F/B2_T1000_H8_fastdecay 2000 110000 > "$OUT/d8_110k.txt" 2>&1 &
wait
cat "$OUT"/d*.txt
mkdir -p "$OUT/logs" && cp -r "${OUT}"/ab "${OUT}"/draws "$OUT/logs/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT/logs" . && rm -rf "$OUT/logs" "$OUT/draws"
