#!/usr/bin/env bash
# mhc31 (twenty-second session): a diagnostic build of mhc30's w700: stamps of each side CTA's
# events (1 range item done, 4 group finished, 8/9 U item wait begun/over, 5 U item done, 6 loop
# left, 7 wait over), of the cluster CTAs, of fn's split and of the coefficient kernel.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc31
ab_mhc_diag $D/diag/cakegrad_gpu_mhc_tests "16384:stats:2 16384:prepare:2"
ab_pack; echo "== done at $(ab_el) s"
