#!/usr/bin/env bash
# kda67 (twenty-first session): base = c184cdd (kernels of fe11770); gref = the grad kernel's
# cumulative log-gates as FP32 references at the 16-token sub-chunk starts plus offsets (decays
# from differences as accurate as their own size; dbeta's kh Gam dKb term handed over in bufw).
# Paired dA_log draws (same seeds on both builds) at the tail shapes, the hash gate (new bits
# expected), 3 alternating chunked-only bench rounds, the suite + sanitizers on gref, ncu
# per-kernel times.
# Build here: EXTRA=bench/results/raw-2026-11-30-s21/kda67/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda67 kda kernels/cuda/kda_chunked_backward.cu base=git:c184cdd gref=tree
# Device call: {"command": "tar xJf .carry/kda67x/kda67.tar.xz -C .carry && bash .carry/kda67/run.sh",
#   "carry": [".carry/kda67x"], "timeout_s": 480}
set -uo pipefail
D=.carry/kda67
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start kda67
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
tails() {  # tag draws-per-process processes seedbase
  local tag=$1 n=$2 procs=$3 seed=$4 v p
  for v in base gref; do
    for p in $(seq 0 $((procs - 1))); do
      KDA_TEST_SEED_BASE=$((seed + p * 100000)) timeout 200 "$D/$v/cakegrad_gpu_kda_tests" \
        --gtest_filter="$F/$tag" --gtest_repeat="$n" 2>&1 | ab_draws > "$AB_OUT/tail_${v}_${tag}_$p.txt" &
    done
  done
}
tails B2_T63_H4 150 3 23100000
tails B2_T65_H4 150 2 23200000
tails B2_T65_H2 200 3 23300000
tails B2_T65_H1 200 2 23400000
tails B1_T200_H2_noinit 100 1 23500000
wait
for tag in B2_T63_H4 B2_T65_H4 B2_T65_H2 B2_T65_H1 B1_T200_H2_noinit; do
  cat "$AB_OUT"/tail_base_${tag}_*.txt | sort > "$AB_OUT/b.txt"
  cat "$AB_OUT"/tail_gref_${tag}_*.txt | sort > "$AB_OUT/c.txt"
  join "$AB_OUT/b.txt" "$AB_OUT/c.txt" > "$AB_OUT/paired_$tag.txt"
  awk -v t="$tag" '{n++; b+=($2>1e-4); c+=($3>1e-4); b3+=($2>3e-5); c3+=($3>3e-5); b1+=($2>1e-5); c1+=($3>1e-5); if ($3<$2) w++}
    END {print t": "n" paired draws; over 1e-4 base "b" gref "c"; over 3e-5 base "b3" gref "c3"; over 1e-5 base "b1" gref "c1"; gref lower on "w}' \
    "$AB_OUT/paired_$tag.txt"
  for v in 2 3; do echo "  col $v median $(ab_median "$AB_OUT/paired_$tag.txt" $v)"; done
  sort -k2 -g "$AB_OUT/paired_$tag.txt" | tail -2 | sed 's/^/  worst base: /'
  sort -k3 -g "$AB_OUT/paired_$tag.txt" | tail -2 | sed 's/^/  worst gref: /'
done | tee "$AB_OUT/tail_summary.txt"
rm -f "$AB_OUT"/tail_*_*_[0-9].txt "$AB_OUT/b.txt" "$AB_OUT/c.txt"
echo "== tails at $(ab_el) s"; ab_pack
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
  HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' HASH_KEEP=1 \
  timeout 240 bash tools/gpu/ab_bench.sh $D kda "base gref" 3 "gref" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
ab_ncu_kernels $D "base gref" "0 2"
ab_pack; echo "== done at $(ab_el) s"
