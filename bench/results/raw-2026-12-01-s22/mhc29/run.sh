#!/usr/bin/env bash
# mhc29 (twenty-second session): a diagnostic build of mhc28's w750 (the side kernel finishing
# its own groups), which was 2-5x slower: globaltimer stamps of each side CTA's events (1 range
# done, 2 counted, 3 group summed, 4 coefficients, 5 U, 6 loop left, 7 wait over), of the cluster
# CTAs and of the coefficient kernel's start, one call of each forward at T = 4096 and 16384.
set -uo pipefail
D=.carry/mhc29
AB_OUT=$(mktemp -d)
source tools/gpu/ab_extras.sh
ab_start mhc29
timeout 120 $D/diag/cakegrad_gpu_mhc_tests --gtest_filter='MhcDiag.*' > "$AB_OUT/diag.txt" 2>&1
grep -E "^diag|PASS|FAIL" "$AB_OUT/diag.txt"
grep -A45 "T=16384 stats rep 2" "$AB_OUT/diag.txt" | head -46
ab_pack; echo "== done at $(ab_el) s"
