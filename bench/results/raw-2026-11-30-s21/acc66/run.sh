#!/usr/bin/env bash
# acc66 (twenty-first session): does the chunked backward's dA_log tail, which is the chunked
# path's own at H = 1 (acc63: 3 of 400 draws of (2, 65, 1) over 1e-4, sequential 0), vanish once
# dA_log has several heads? rel-L2 is then taken over H values, which must all cancel at once.
# Every draw runs both backwards on the same inputs (KDA_PAIR_SEQUENTIAL=1); per output the worst
# error of each path is kept as well. Binaries: tools/gpu/package_for_gpu.sh's archive.
# Device call: {"command": "bash bench/results/raw-2026-11-30-s21/acc66/run.sh",
#   "carry": [".carry/gpu.tar.xz"], "timeout_s": 400}
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
tar xJf .carry/gpu.tar.xz
OUT=${OUT:-/tmp/out}
T=.carry/gpu/bin/cakegrad_gpu_kda_tests
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pairs() { awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {v[$3]=$9; if ($3=="sequential") print seed, v["chunked"], v["sequential"]}'; }
run() {  # tag seedbase draws
  KDA_PAIR_SEQUENTIAL=1 KDA_TEST_SEED_BASE=$2 timeout 330 $T --gtest_filter="$F/$1" \
    --gtest_repeat=$3 > "$OUT/log_$1_$2.txt" 2>&1
  pairs < "$OUT/log_$1_$2.txt" > "$OUT/pairs_$1_$2.txt"
}
for b in 0 1 2 3 4 5; do run B2_T65_H2 2210${b}0000 200 & done
for b in 0 1 2 3; do run B2_T65_H4 2220${b}0000 200 & done
run B2_T63_H4 22300000 200 &
run B2_T65_H1 22400000 200 &
wait
echo "== short shapes at $(el) s"
run B1_T4096_H4 22500000 12 &
for b in 1 2 3; do run B1_T16384_H2_rep$b 2260000$b 3 & done
run B1_T200_H2_noinit 22700000 200 &
wait
echo "== long at $(el) s"
for tag in B2_T65_H1 B2_T65_H2 B2_T65_H4 B2_T63_H4 B1_T200_H2_noinit B1_T4096_H4 B1_T16384_H2; do
  cat "$OUT"/pairs_${tag}*.txt > "$OUT/all_$tag.txt"
  awk -v t=$tag '{n++; c+=($2>1e-4); s+=($3>1e-4); c3+=($2>3e-5); s3+=($3>3e-5); if ($2>1e-4 && $3>1e-4) both++}
    END {print t": "n" draws; over 1e-4 chunked "c" sequential "s" both "both"; over 3e-5 chunked "c3" sequential "s3}' "$OUT/all_$tag.txt"
  sort -k2 -g "$OUT/all_$tag.txt" | tail -3 | sed 's/^/  worst chunked: /'
  sort -k3 -g "$OUT/all_$tag.txt" | tail -2 | sed 's/^/  worst sequential: /'
  # worst of every output per path over all draws of the shape
  cat "$OUT"/log_${tag}*.txt | awk '$8=="rel-L2" {k=$3" "$7; if ($9+0 > m[k]) m[k]=$9+0} END {for (k in m) printf "  max %-28s %.3e\n", k, m[k]}' | sort
done | tee "$OUT/summary.txt"
grep -h "FAILED\|Failure" "$OUT"/log_*.txt | sort | uniq -c | head -20
cd "$OUT" && tar czf logs.tgz log_*.txt pairs_*.txt && rm -f log_*.txt pairs_*.txt
echo "== done at $(el) s"
