#!/usr/bin/env bash
# mhc31 (twenty-second session): a diagnostic build of mhc30's w700: stamps of each side CTA's
# events (1 range item done, 4 group finished, 8/9 U item wait begun/over, 5 U item done, 6 loop
# left, 7 wait over), of the cluster CTAs, of fn's split and of the coefficient kernel.
set -uo pipefail
D=.carry/mhc31
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start mhc31
timeout 120 $D/diag/cakegrad_gpu_mhc_tests --gtest_filter='MhcDiag.*' > "$AB_OUT/diag.txt" 2>&1
grep -E "^diag|PASS|FAIL" "$AB_OUT/diag.txt"
grep -A42 "T=16384 stats rep 2" "$AB_OUT/diag.txt" | head -43
grep -A42 "T=16384 prepare rep 2" "$AB_OUT/diag.txt" | head -43
ab_pack; echo "== done at $(ab_el) s"
