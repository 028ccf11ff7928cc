#!/usr/bin/env bash
# mhc28 (twenty-second session): the side kernel finishes its own token groups. mhc27's stamps
# showed the side CTAs running beside the clusters under PDL, but the one-thread-a-token finish
# kernel after them took ~45 us. Now the CTA that completes a group's last k-range sums it, writes
# m and r, runs the coefficient code (16 lanes a token) and U for the group; only the cluster
# tokens' coefficient kernel follows. Variants: weight 750 (w750), 900, 600; base is main. Bench
# at T = 4096, 8192, 16384 (3 rounds); the suite and both sanitizers on w750.
set -uo pipefail
D=.carry/mhc28
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start mhc28
OUT=$AB_OUT BENCH_ENV="MHC_BENCH_T=4096,8192,16384" BENCH_TIMEOUT=60 TEST_TIMEOUT=200 \
  timeout 400 bash tools/gpu/ab_bench.sh $D mhc "base w750 w900 w600" 3 "w750" \
  > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; grep -v "backward_\|forward_finish" "$AB_OUT/ab_stdout.txt"
grep "rel-L2 T=4\|rel-L2 T=16384 C=4096" "$AB_OUT/ab/tests_w750.log"
ab_pack; echo "== done at $(ab_el) s"
