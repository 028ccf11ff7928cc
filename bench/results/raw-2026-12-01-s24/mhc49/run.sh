#!/usr/bin/env bash
# mhc49 (twenty-fourth session): where forward_stats' split-K CTAs trigger the coefficient
# kernel's programmatic launch. base = main c17beb3 (at each CTA's last stage); t2 = one stage
# earlier; t0 = at the first stage (twenty-third session's cand5 triggered at the start too, with
# 2048 blocks of 128 threads). Same bits; 3 alternating rounds at T = 4096, 8192, 16384.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc49
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base t2 t0" t2 4096,8192,16384 'backward_\|forward_finish\|forward_prepare\|prepare+finish'
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
