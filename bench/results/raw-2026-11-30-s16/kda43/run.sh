#!/usr/bin/env bash
# kda43 (sixteenth session): the two triangular solves of the grad kernel blocked by 16 tokens,
# the off-diagonal blocks as BF16x6 products on the tensor cores, warp-local (no block barrier).
#   bs:  the [dKb | dVb] back substitution blocked (16 warps, 16 columns each);
#   bsu: bs + the Uv forward substitution blocked (8 warps, 16 columns each).
# New summation order, so no hash gate: 3 alternating rounds, the suite and both sanitizers on bs
# and bsu, the dA_log tail (100 fresh draws at the two shapes seen failing) on all three, the
# new hash lines for the record, ncu grad-kernel time.
set -uo pipefail
D=.carry/kda43
final=${OUT:-/tmp/out}; mkdir -p "$final"; out=$(mktemp -d)
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda43.tgz" -C "$out" .; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
OUT=$out BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=200 \
  timeout 300 bash tools/gpu/ab_bench.sh $D kda "base bs bsu" 3 "bs bsu" > "$out/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(el) s"; cat "$out/ab_stdout.txt"; pack
for v in base bs bsu; do
  for o in 0 1; do
    KDA_HASH_SEED_OFFSET=$o timeout 60 $D/$v/cakegrad_gpu_kda_tests \
      --gtest_filter='KdaKernels.*HashesForCrossBuildComparison' 2>&1 | grep hashes | sed "s/^/$v offset $o: /"
  done
done > "$out/hashes.txt"; echo "hashes at $(el) s"
for v in base bs bsu; do
  for f in 'Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/B2_T1000_H4_fastdecay' \
           'Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/B2_T65_H1*'; do
    [ "$(el)" -lt 420 ] || break
    tag=$(echo "$f" | sed -E 's/.*\///; s/\*//')
    timeout 60 $D/$v/cakegrad_gpu_kda_tests --gtest_filter="$f" --gtest_repeat=100 > "$out/tail_${v}_$tag.log" 2>&1
    awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {print $9, seed}' "$out/tail_${v}_$tag.log" | sort -g > "$out/tail_${v}_$tag.sorted"
    echo "$v $tag: $(wc -l < "$out/tail_${v}_$tag.sorted") draws, dA_log over 1e-4: $(awk '$1 > 1e-4' "$out/tail_${v}_$tag.sorted" | wc -l), over 3e-5: $(awk '$1 > 3e-5' "$out/tail_${v}_$tag.sorted" | wc -l), median $(awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' "$out/tail_${v}_$tag.sorted"), worst: $(tail -2 "$out/tail_${v}_$tag.sorted" | tr '\n' ' ') at $(el) s"
  done
done | tee "$out/tail_summary.txt"
pack
for v in base bs bsu; do
  [ "$(el)" -lt 470 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaChunkGrad --launch-skip 6 -c 1 $D/$v/cakegrad_kda_bench > "$out/ncu_${v}_0.txt" 2>&1
  echo "ncu $v case 0: $(grep -E 'gpu__time_duration' "$out/ncu_${v}_0.txt" | tail -1)"
done | tee "$out/ncu_summary.txt"
pack; echo "== done at $(el) s"
