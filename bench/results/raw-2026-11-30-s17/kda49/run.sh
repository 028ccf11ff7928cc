#!/usr/bin/env bash
# kda49 (seventeenth session): is the chunked backward's dA_log tail the problem's or the
# algorithm's? Each fresh draw runs the chunked backward and then the sequential one (the default)
# on the same inputs (KDA_PAIR_SEQUENTIAL=1), and both errors are printed per seed: 120 draws at
# (2, 1000, 4) fast decay and at (2, 65, 1), plus the worst seeds recorded in kda44 and kda46.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda49
bin=$D/main/cakegrad_gpu_kda_tests
pair() {  # tag draws [seed]
  local tag=$1 n=$2 seed=${3:-}
  KDA_PAIR_SEQUENTIAL=1 ${seed:+KDA_TEST_SEED=$seed} timeout 200 $bin \
    --gtest_filter="Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/$tag" \
    --gtest_repeat="$n" 2>&1 |
    awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {v[$3]=$9; if ($3=="sequential") print seed, v["chunked"], v["sequential"]}'
}
for tag in B2_T1000_H4_fastdecay B2_T65_H1; do
  pair $tag 120 > "$AB_OUT/pair_$tag.txt" &
done
wait
echo "== draws at $(ab_el) s"
for s in 2857004341 4191796076 1860784862; do pair B2_T1000_H4_fastdecay 1 $s; done > "$AB_OUT/pair_worst_fastdecay.txt"
for s in 3623010256 4050146304 1117603600; do pair B2_T65_H1 1 $s; done > "$AB_OUT/pair_worst_T65.txt"
for f in "$AB_OUT"/pair_*.txt; do
  echo "--- $(basename $f): seed, chunked dA_log, sequential dA_log"
  awk '{n++; c+=($2>1e-4); s+=($3>1e-4); c3+=($2>3e-5); s3+=($3>3e-5); if ($2>$3) cw++}
       END {print n" draws; over 1e-4 chunked "c" sequential "s"; over 3e-5 chunked "c3" sequential "s3"; chunked worse on "cw}' "$f"
  sort -k2 -g "$f" | tail -6
done
ab_pack; echo "== done at $(ab_el) s"
