#!/usr/bin/env bash
# acc63 (twentieth session): is the chunked backward (76660c3: checkpoint S0 and gate sums about
# FP32-exact) as accurate as the sequential one, the default? Every draw of
# KdaChunkedBackwardAccuracy runs both on the same inputs (KDA_PAIR_SEQUENTIAL=1) and prints both
# errors. Fresh draws (seeded: KDA_TEST_SEED_BASE) at the tail shapes, kda61's two worst seeds,
# and the long and no-initial-state shapes. Binaries: tools/gpu/package_for_gpu.sh's archive.
# Device call: {"command": "bash bench/results/raw-2026-11-30-s20/acc63/run.sh",
#   "carry": [".carry/gpu.tar.xz"], "timeout_s": 420}
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
tar xJf .carry/gpu.tar.xz
OUT=${OUT:-/tmp/out}
T=.carry/gpu/bin/cakegrad_gpu_kda_tests
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pairs() { awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {v[$3]=$9; if ($3=="sequential") print seed, v["chunked"], v["sequential"]}'; }
run() {  # tag seedbase draws
  KDA_PAIR_SEQUENTIAL=1 KDA_TEST_SEED_BASE=$2 timeout 300 $T --gtest_filter="$F/$1" \
    --gtest_repeat=$3 > "$OUT/log_$1_$2.txt" 2>&1
  pairs < "$OUT/log_$1_$2.txt" > "$OUT/pairs_$1_$2.txt"
}
for b in 21200000 21300000 21400000 21500000; do run B2_T65_H1 $b 100 & done
run B1_T200_H2_noinit 21600000 150 &
run B2_T1000_H4_fastdecay 21700000 100 &
wait
echo "== fresh draws at $(el) s"
for b in 1 2 3; do run B1_T16384_H2_rep$b 2180000$b 4 & done
for s in 19200023 19200004; do
  KDA_PAIR_SEQUENTIAL=1 KDA_TEST_SEED=$s timeout 60 $T --gtest_filter="$F/B2_T65_H1" 2>&1 |
    pairs | sed "s/^/kda61 worst: /"
done > "$OUT/kda61_worst.txt"
wait
echo "== long at $(el) s"
for tag in B2_T65_H1 B1_T200_H2_noinit B2_T1000_H4_fastdecay B1_T16384_H2; do
  cat "$OUT"/pairs_${tag}*.txt > "$OUT/all_$tag.txt"
  awk -v t=$tag '{n++; c+=($2>1e-4); s+=($3>1e-4); c3+=($2>3e-5); s3+=($3>3e-5); if ($2>1e-4 && $3>1e-4) both++}
    END {print t": "n" draws; over 1e-4 chunked "c" sequential "s" both "both"; over 3e-5 chunked "c3" sequential "s3}' "$OUT/all_$tag.txt"
  sort -k2 -g "$OUT/all_$tag.txt" | tail -3 | sed 's/^/  worst chunked: /'
  sort -k3 -g "$OUT/all_$tag.txt" | tail -2 | sed 's/^/  worst sequential: /'
done | tee "$OUT/summary.txt"
cat "$OUT/kda61_worst.txt"
grep -h "FAILED\|Failure" "$OUT"/log_*.txt | sort | uniq -c | head -20
echo "== done at $(el) s"
