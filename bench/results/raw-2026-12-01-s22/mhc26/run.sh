#!/usr/bin/env bash
# mhc26 (twenty-second session): the side SMs' share of the forwards, now one stream: fn's split,
# the cluster kernel (which triggers its dependents at its start), the side stats kernel launched
# programmatically after it (persistent, sized to the side SMs' resident CTAs, so it can only be
# placed beside the clusters), then the coefficients, the side sums and U. mhc24/25 forked a
# stream and the side CTAs could be placed before the clusters (more, shorter side CTAs were
# slower). Variants: w750 (8 k-ranges, weight 750), w1000, w600, s4 (4 k-ranges, 750); base is
# main. Bench at T = 4096, 8192, 16384; the suite and both sanitizers on w750.
set -uo pipefail
D=.carry/mhc26
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start mhc26
OUT=$AB_OUT BENCH_ENV="MHC_BENCH_T=4096,8192,16384" BENCH_TIMEOUT=60 TEST_TIMEOUT=200 \
  timeout 400 bash tools/gpu/ab_bench.sh $D mhc "base w750 w1000 w600 s4" 3 "w750" \
  > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"
ab_pack; echo "== done at $(ab_el) s"
