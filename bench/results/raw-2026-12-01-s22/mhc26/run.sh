#!/usr/bin/env bash
# mhc26 (twenty-second session): the side SMs' share of the forwards, now one stream: fn's split,
# the cluster kernel (which triggers its dependents at its start), the side stats kernel launched
# programmatically after it (persistent, sized to the side SMs' resident CTAs, so it can only be
# placed beside the clusters), then the coefficients, the side sums and U. mhc24/25 forked a
# stream and the side CTAs could be placed before the clusters (more, shorter side CTAs were
# slower). Variants: w750 (8 k-ranges, weight 750), w1000, w600, s4 (4 k-ranges, 750); base is
# main. Bench at T = 4096, 8192, 16384; the suite and both sanitizers on w750.
# (Rewritten after the call onto tools/gpu/ab_extras.sh's ab_mhc_bench: the same bench and
# checks; the call printed all of ab_stdout.txt.)
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc26
ab_mhc_bench $D "base w750 w1000 w600 s4" w750 4096,8192,16384
ab_pack; echo "== done at $(ab_el) s"
