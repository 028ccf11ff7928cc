#!/usr/bin/env bash
# acc70 (twenty-first session): more evidence for auto's 2-head threshold (ab93461). The final
# build's binaries (97bee1e, .carry/gpu.tar.xz), chunked beside sequential on the same fresh draws
# (KDA_PAIR_SEQUENTIAL=1) at the smallest head counts auto sends to the chunked kernels: two and
# three heads, one partial chunk, a chunk plus a token, no initial state, packed documents, long.
# Device call: {"command": "bash bench/results/raw-2026-11-30-s21/acc70/run.sh",
#   "carry": [".carry/gpu.tar.xz"], "timeout_s": 300}
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
tar xJf .carry/gpu.tar.xz
OUT=${OUT:-/tmp/out}
AB_OUT=$OUT AB_TAIL_TIMEOUT=200
source tools/gpu/ab_extras.sh
T=.carry/gpu/bin/cakegrad_gpu_kda_tests
for b in 0 1 2 3; do ab_pair_sequential $T B2_T63_H2 2710${b}0000 300 & done
for b in 0 1 2 3; do ab_pair_sequential $T B2_T65_H2 2720${b}0000 300 & done
for b in 0 1; do ab_pair_sequential $T B1_T200_H2_noinit 2730${b}0000 200 & done
for b in 0 1; do ab_pair_sequential $T B1_T876_H3_docs16_i64 2740${b}0000 100 & done
for b in 1 2 3; do ab_pair_sequential $T B1_T16384_H2_rep$b 275${b}0000 2 & done
wait
echo "== draws at $(el) s"
ab_pair_summary "B2_T63_H2 B2_T65_H2 B1_T200_H2_noinit B1_T876_H3_docs16_i64 B1_T16384_H2_rep1 B1_T16384_H2_rep2 B1_T16384_H2_rep3"
(cd "$OUT/pairs" && tar czf ../pairs.tgz log_*.txt && rm -f log_*.txt pairs_*.txt)
echo "== done at $(el) s"
