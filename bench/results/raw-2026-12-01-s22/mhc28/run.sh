#!/usr/bin/env bash
# mhc28 (twenty-second session): the side kernel finishes its own token groups. mhc27's stamps
# showed the side CTAs running beside the clusters under PDL, but the one-thread-a-token finish
# kernel after them took ~45 us. Now the CTA that completes a group's last k-range sums it, writes
# m and r, runs the coefficient code (16 lanes a token) and U for the group; only the cluster
# tokens' coefficient kernel follows. Variants: weight 750 (w750), 900, 600; base is main. Bench
# at T = 4096, 8192, 16384 (3 rounds); the suite and both sanitizers on w750.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc28
ab_mhc_bench $D "base w750 w900 w600" w750 4096,8192,16384
ab_pack; echo "== done at $(ab_el) s"
