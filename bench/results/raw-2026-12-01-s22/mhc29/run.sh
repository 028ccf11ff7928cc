#!/usr/bin/env bash
# mhc29 (twenty-second session): a diagnostic build of mhc28's w750 (the side kernel finishing
# its own groups), which was 2-5x slower: globaltimer stamps of each side CTA's events (1 range
# done, 2 counted, 3 group summed, 4 coefficients, 5 U, 6 loop left, 7 wait over), of the cluster
# CTAs and of the coefficient kernel's start, one call of each forward at T = 4096 and 16384.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc29
ab_mhc_diag $D/diag/cakegrad_gpu_mhc_tests 16384:stats:2
ab_pack; echo "== done at $(ab_el) s"
