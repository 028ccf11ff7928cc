#!/usr/bin/env bash
# mhc30 (twenty-second session): mhc29's stamps showed mhc28's group finisher (sum, coefficients
# and U in the CTA that completed a group's last k-range) taking 45-70 us a group, on the same few
# CTAs again and again. Now the side CTAs take work items from a counter: range items, whose last
# per group sums it (all threads, loads in flight), writes m and r and runs the coefficients of all
# 64 records in one interleaved pass, then raises the group's flag; then U items of 8 tokens, each
# waiting for its group's flag. Variants: weight 700 (w700), 850, 550; base is main. Bench at
# T = 4096, 8192, 16384 (3 rounds); the suite and both sanitizers on w700.
set -uo pipefail
D=.carry/mhc30
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start mhc30
OUT=$AB_OUT BENCH_ENV="MHC_BENCH_T=4096,8192,16384" BENCH_TIMEOUT=60 TEST_TIMEOUT=200 \
  timeout 400 bash tools/gpu/ab_bench.sh $D mhc "base w700 w850 w550" 3 "w700" \
  > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; grep -v "backward_\|forward_finish" "$AB_OUT/ab_stdout.txt"
grep "rel-L2 T=4\|rel-L2 T=16384 C=4096" "$AB_OUT/ab/tests_w700.log"
ab_pack; echo "== done at $(ab_el) s"
