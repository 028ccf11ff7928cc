#!/usr/bin/env bash
# Twenty-first session's final build: tools/gpu/final_build_call.sh (every family's suite, the
# daemon, Python, the benches, KDA's sanitizers, ncu per-kernel times), then the chunked backward
# beside the sequential one on the same draws (KDA_PAIR_SEQUENTIAL=1) at the head counts where
# the default auto choice changes (H = 1 sequential, H = 2 chunked).
# Device call: {"command": "bash bench/results/raw-2026-11-30-s21/final/run.sh",
#   "carry": [".carry/gpu.tar.xz", "client/python/cakegrad/v1"], "timeout_s": 560}
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
OUT=${OUT:-/tmp/out}
bash tools/gpu/final_build_call.sh
echo "== final_build_call at $(el) s"
mkdir -p "$OUT/pairs"
T=.carry/gpu/bin/cakegrad_gpu_kda_tests
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
pairs() { awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {v[$3]=$9; if ($3=="sequential") print seed, v["chunked"], v["sequential"]}'; }
run() {  # tag seedbase draws
  KDA_PAIR_SEQUENTIAL=1 KDA_TEST_SEED_BASE=$2 timeout 120 $T --gtest_filter="$F/$1" \
    --gtest_repeat=$3 > "$OUT/pairs/log_$1_$2.txt" 2>&1
  pairs < "$OUT/pairs/log_$1_$2.txt" > "$OUT/pairs/pairs_$1_$2.txt"
}
for b in 0 1 2 3; do run B2_T63_H2 2610${b}0000 150 & done
for b in 0 1 2 3; do run B2_T65_H2 2620${b}0000 150 & done
for b in 0 1; do run B2_T65_H1 2630${b}0000 150 & done
wait
for tag in B2_T63_H2 B2_T65_H2 B2_T65_H1; do
  cat "$OUT"/pairs/pairs_${tag}_*.txt > "$OUT/pairs/all_$tag.txt"
  awk -v t=$tag '{n++; c+=($2>1e-4); s+=($3>1e-4); c3+=($2>3e-5); s3+=($3>3e-5); c1+=($2>1e-5); s1+=($3>1e-5)}
    END {print t": "n" draws; over 1e-4 chunked "c" sequential "s"; over 3e-5 chunked "c3" sequential "s3"; over 1e-5 chunked "c1" sequential "s1}' "$OUT/pairs/all_$tag.txt"
  sort -k2 -g "$OUT/pairs/all_$tag.txt" | tail -2 | sed 's/^/  worst chunked: /'
done | tee "$OUT/pairs/summary.txt"
grep -h "FAILED\|Failure" "$OUT"/pairs/log_*.txt | sort | uniq -c | head
(cd "$OUT/pairs" && tar czf ../pairs.tgz log_*.txt pairs_*.txt && rm -f log_*.txt pairs_*.txt)
echo "== done at $(el) s"
