#!/usr/bin/env bash
# kda68 (twenty-first session): base = e966908 (kda67's gref merged: the grad kernel's log-gates
# as sub-chunk references plus offsets); kdlo = the checkpoint preparation's Kdec^T decays from
# its FP64 gate sums (the FP32 difference plus that of the sums' rounding errors, which the sums
# leave in the Kdec^T staging buffer); the forward's instances unchanged (same SASS).
# Paired dA_log draws (same seeds on both builds) at the tail shapes, the hash gate (new bits
# expected), 3 alternating chunked-only bench rounds, the suite + sanitizers on kdlo, ncu
# per-kernel times.
# Build here: EXTRA=bench/results/raw-2026-11-30-s21/kda68/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda68 kda kernels/cuda/kda_chunked_forward.cu base=git:e966908 kdlo=tree
# Device call: {"command": "tar xJf .carry/kda68x/kda68.tar.xz -C .carry && bash .carry/kda68/run.sh",
#   "carry": [".carry/kda68x"], "timeout_s": 480}
set -uo pipefail
D=.carry/kda68
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start kda68
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
tails() {  # tag draws-per-process processes seedbase
  local tag=$1 n=$2 procs=$3 seed=$4 v p
  for v in base kdlo; do
    for p in $(seq 0 $((procs - 1))); do
      KDA_TEST_SEED_BASE=$((seed + p * 100000)) timeout 200 "$D/$v/cakegrad_gpu_kda_tests" \
        --gtest_filter="$F/$tag" --gtest_repeat="$n" 2>&1 | ab_draws > "$AB_OUT/tail_${v}_${tag}_$p.txt" &
    done
  done
}
tails B2_T63_H4 150 4 24100000
tails B2_T65_H4 150 3 24500000
tails B2_T65_H2 200 3 24900000
tails B2_T65_H1 200 2 25300000
tails B1_T200_H2_noinit 100 1 25600000
wait
for tag in B2_T63_H4 B2_T65_H4 B2_T65_H2 B2_T65_H1 B1_T200_H2_noinit; do
  cat "$AB_OUT"/tail_base_${tag}_*.txt | sort > "$AB_OUT/b.txt"
  cat "$AB_OUT"/tail_kdlo_${tag}_*.txt | sort > "$AB_OUT/c.txt"
  join "$AB_OUT/b.txt" "$AB_OUT/c.txt" > "$AB_OUT/paired_$tag.txt"
  awk -v t="$tag" '{n++; b+=($2>1e-4); c+=($3>1e-4); b3+=($2>3e-5); c3+=($3>3e-5); b1+=($2>1e-5); c1+=($3>1e-5); if ($3<$2) w++}
    END {print t": "n" paired draws; over 1e-4 base "b" kdlo "c"; over 3e-5 base "b3" kdlo "c3"; over 1e-5 base "b1" kdlo "c1"; kdlo lower on "w}' \
    "$AB_OUT/paired_$tag.txt"
  for v in 2 3; do echo "  col $v median $(ab_median "$AB_OUT/paired_$tag.txt" $v)"; done
  sort -k2 -g "$AB_OUT/paired_$tag.txt" | tail -2 | sed 's/^/  worst base: /'
  sort -k3 -g "$AB_OUT/paired_$tag.txt" | tail -2 | sed 's/^/  worst kdlo: /'
done | tee "$AB_OUT/tail_summary.txt"
rm -f "$AB_OUT"/tail_*_*_[0-9].txt "$AB_OUT/b.txt" "$AB_OUT/c.txt"
echo "== tails at $(ab_el) s"; ab_pack
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
  HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' HASH_KEEP=1 \
  timeout 240 bash tools/gpu/ab_bench.sh $D kda "base kdlo" 3 "kdlo" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
ab_ncu_kernels $D "base kdlo" "0 2"
ab_pack; echo "== done at $(ab_el) s"
