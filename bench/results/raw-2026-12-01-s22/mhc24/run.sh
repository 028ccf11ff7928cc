#!/usr/bin/env bash
# mhc24 (twenty-second session): the forwards' last tokens on the 20 SMs that no 16-CTA cluster
# holds (two-kernel stats kernel over 4 k-ranges on a forked stream, then their sum, U for
# forward_prepare). Variants set the side SMs' rate weight (kSideRatePermille): w500, w750 (the
# tree), w1000; base is main. New stats bits by design: no hash gate. 3 alternating rounds of the
# mHC bench at T = 4096, 16384; the suite and both sanitizers on w750.
set -uo pipefail
D=.carry/mhc24
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start mhc24
OUT=$AB_OUT BENCH_ENV="MHC_BENCH_T=4096,16384" BENCH_TIMEOUT=60 TEST_TIMEOUT=200 \
  timeout 400 bash tools/gpu/ab_bench.sh $D mhc "base w500 w750 w1000" 3 "w750" \
  > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"
ab_pack; echo "== done at $(ab_el) s"
