#!/usr/bin/env bash
# kda50 (eighteenth session): the checkpoint preparation's Uv with Tinv' in three BF16 parts
# (about FP32-exact), used as it is by the per-chunk gradient kernel, whose FP32 re-solve of Uv
# (~8% of its time) is gone. New bits by design (no hash gate). Paired dA_log tails (the same
# 120 draws for base and cand: KDA_TEST_SEED_BASE), 3 alternating bench rounds, the suite and
# both sanitizers on cand, the grad kernel's ncu time.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda50
tail_run() {  # variant tag draws
  KDA_TEST_SEED_BASE=7000000 timeout 200 $D/$1/cakegrad_gpu_kda_tests \
    --gtest_filter="Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/$2" \
    --gtest_repeat="$3" 2>&1 | awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {print seed, $9}' \
    > "$AB_OUT/tail_$1_$2.txt"
}
for tag in B2_T65_H1 B2_T1000_H4_fastdecay; do
  for v in base cand; do tail_run $v $tag 120 & done
done
wait
echo "== tails at $(ab_el) s"
for tag in B2_T65_H1 B2_T1000_H4_fastdecay; do
  join <(sort "$AB_OUT/tail_base_$tag.txt") <(sort "$AB_OUT/tail_cand_$tag.txt") \
    > "$AB_OUT/paired_$tag.txt"
  awk -v t=$tag '{n++; b+=($2>1e-4); c+=($3>1e-4); b3+=($2>3e-5); c3+=($3>3e-5); if ($3<$2) w++}
    END {print t": "n" paired draws; over 1e-4 base "b" cand "c"; over 3e-5 base "b3" cand "c3"; cand lower on "w}' \
    "$AB_OUT/paired_$tag.txt"
  for v in 2 3; do
    echo "  col $v median $(awk -v c=$v '{print $c}' "$AB_OUT/paired_$tag.txt" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
  done
  sort -k2 -g "$AB_OUT/paired_$tag.txt" | tail -4
done
ab_pack
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=240 \
  timeout 420 bash tools/gpu/ab_bench.sh $D kda "base cand" 3 "cand" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
AB_NCU_UNTIL=560 ab_ncu_time $D "base cand"
ab_pack; echo "== done at $(ab_el) s"
