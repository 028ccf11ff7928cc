#!/usr/bin/env bash
# mhc23 (seventeenth session): backward_finish's token kernel split in three: the Sinkhorn
# backward (1a, latency-bound, from stats and grad_stats) on a forked stream beside the read of X
# and dU for dpre (1b, 2 CTAs an SM walking the token pairs), then the finish into the record (1c).
# Same sums, same order: bitwise main's by construction. Hash gate (MhcKernels backward hashes at
# 6 shapes), 3 alternating rounds of the mHC bench, suite + sanitizers on cand.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc23
OUT=$AB_OUT HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' HASH_OFFSETS="0" \
  BENCH_ENV="MHC_BENCH_T=4096,16384" BENCH_TIMEOUT=60 TEST_TIMEOUT=200 \
  timeout 330 bash tools/gpu/ab_bench.sh $D mhc "base cand" 3 "cand" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; cat "$AB_OUT/ab/hashes_base.txt"
ab_pack; echo "== done at $(ab_el) s"
