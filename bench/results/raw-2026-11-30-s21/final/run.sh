#!/usr/bin/env bash
# Twenty-first session's final build: tools/gpu/final_build_call.sh (every family's suite, the
# daemon, Python, the benches, KDA's sanitizers, ncu per-kernel times), then the chunked backward
# beside the sequential one on the same draws (KDA_PAIR_SEQUENTIAL=1) at the head counts where
# the default auto choice changes (H = 1 sequential, H = 2 chunked). (Those steps as written then
# are ab_extras.sh's ab_pair_sequential / ab_pair_summary since: the same commands and files.)
# Device call: {"command": "bash bench/results/raw-2026-11-30-s21/final/run.sh",
#   "carry": [".carry/gpu.tar.xz", "client/python/cakegrad/v1"], "timeout_s": 560}
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
OUT=${OUT:-/tmp/out}
bash tools/gpu/final_build_call.sh
echo "== final_build_call at $(el) s"
AB_OUT=$OUT AB_TAIL_TIMEOUT=120
source tools/gpu/ab_extras.sh
T=.carry/gpu/bin/cakegrad_gpu_kda_tests
for b in 0 1 2 3; do ab_pair_sequential $T B2_T63_H2 2610${b}0000 150 & done
for b in 0 1 2 3; do ab_pair_sequential $T B2_T65_H2 2620${b}0000 150 & done
for b in 0 1; do ab_pair_sequential $T B2_T65_H1 2630${b}0000 150 & done
wait
ab_pair_summary "B2_T63_H2 B2_T65_H2 B2_T65_H1"
(cd "$OUT/pairs" && tar czf ../pairs.tgz log_*.txt pairs_*.txt && rm -f log_*.txt pairs_*.txt)
echo "== done at $(el) s"
