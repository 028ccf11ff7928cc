#!/usr/bin/env bash
# mhc51 (twenty-fourth session): mhc48's L2 prefetches in backward_finish's token kernel with one
# request a 128-byte line (lanes 0, 8, 16, 24 of each row's 512 bytes) instead of one a lane:
# pf2q / pf4q, 2 / 4 groups ahead. base = main. Same bits (hash gate); 3 alternating rounds at
# T = 4096, 16384; suite + sanitizers on pf2q.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc51
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base pf2q pf4q" pf2q 4096,16384 'forward_\|backward_prepare\|prepare+finish'
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
