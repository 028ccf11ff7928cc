#!/usr/bin/env bash
# mhc33 (twenty-second session): the side SMs compute only the k-range partials of their tokens
# (mhc26's persistent side kernel, programmatic after the cluster kernel, which mhc27's stamps
# showed running beside the clusters on the 20 idle SMs); the records of the side tokens are
# summed by the coefficient kernel after both (16 lanes a token, as every token's coefficients),
# and their U by the U kernel on the whole GPU. Variants: weight 750 (w750), 550; base is main.
# Bench at T = 4096, 8192, 16384 (3 rounds); the suite and both sanitizers on w750.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc33
ab_mhc_bench $D "base w750 w550" w750 4096,8192,16384
ab_pack; echo "== done at $(ab_el) s"
