#!/usr/bin/env bash
# mhc33 (twenty-second session): the side SMs compute only the k-range partials of their tokens
# (mhc26's persistent side kernel, programmatic after the cluster kernel, which mhc27's stamps
# showed running beside the clusters on the 20 idle SMs); the records of the side tokens are
# summed by the coefficient kernel after both (16 lanes a token, as every token's coefficients),
# and their U by the U kernel on the whole GPU. Variants: weight 750 (w750), 550; base is main.
# Bench at T = 4096, 8192, 16384 (3 rounds); the suite and both sanitizers on w750.
set -uo pipefail
D=.carry/mhc33
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start mhc33
OUT=$AB_OUT BENCH_ENV="MHC_BENCH_T=4096,8192,16384" BENCH_TIMEOUT=60 TEST_TIMEOUT=200 \
  timeout 400 bash tools/gpu/ab_bench.sh $D mhc "base w750 w550" 3 "w750" \
  > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; grep -v "backward_\|forward_finish" "$AB_OUT/ab_stdout.txt"
grep "rel-L2 T=4\|rel-L2 T=16384 C=4096" "$AB_OUT/ab/tests_w750.log"
ab_pack; echo "== done at $(ab_el) s"
