#!/usr/bin/env bash
# kda48 (seventeenth session): the chunked backward's checkpoint state pass and reverse chain side
# by side (the chain on a forked side stream, each kernel in the narrowest slices that fit one wave
# on half the SMs: 64 rows at (1, 8192, 32), 32 at (1, 32768, 16); the packed shape's 256 chains
# stay one after the other). Host launch code only; the kernels are main's. Both variants carry
# the forward's split launch (kda_chunked_forward.cu: prep and state pass apart, same behaviour).
# Hashes of both printed (not a gate: the slice width may or may not change bits), 3 alternating
# rounds, suite + sanitizers on conc.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda48
for v in base conc; do
  timeout 120 $D/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.*HashesForCrossBuildComparison' \
    2>&1 | grep hashes > "$AB_OUT/hashes_$v.txt"
done
if cmp -s "$AB_OUT/hashes_base.txt" "$AB_OUT/hashes_conc.txt"; then echo "hashes EQUAL"; else
  echo "hashes DIFFER:"; diff "$AB_OUT/hashes_base.txt" "$AB_OUT/hashes_conc.txt" | cut -c1-200; fi
echo "== hashes at $(ab_el) s"
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=200 \
  timeout 300 bash tools/gpu/ab_bench.sh $D kda "base conc" 3 "conc" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
echo "== done at $(ab_el) s"
