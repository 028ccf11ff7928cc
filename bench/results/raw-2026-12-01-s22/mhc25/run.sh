#!/usr/bin/env bash
# mhc25 (twenty-second session): mhc24's side SMs with the side stats kernel over more k-ranges
# (shorter CTAs: mhc24's 4 ranges lost 35% at T = 4096). s4 = mhc24's w750 (4 ranges, weight
# 750), s8 (8 ranges, 750), s16 (16 ranges, 750), s16w (16 ranges, 1000); base is main. Bench at
# T = 4096, 8192, 16384; the suite and both sanitizers on s16.
set -uo pipefail
D=.carry/mhc25
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start mhc25
OUT=$AB_OUT BENCH_ENV="MHC_BENCH_T=4096,8192,16384" BENCH_TIMEOUT=60 TEST_TIMEOUT=200 \
  timeout 400 bash tools/gpu/ab_bench.sh $D mhc "base s4 s8 s16 s16w" 3 "s16" \
  > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"
ab_pack; echo "== done at $(ab_el) s"
