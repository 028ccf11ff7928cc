#!/usr/bin/env bash
# mhc24 (twenty-second session): the forwards' last tokens on the 20 SMs that no 16-CTA cluster
# holds (two-kernel stats kernel over 4 k-ranges on a forked stream, then their sum, U for
# forward_prepare). Variants set the side SMs' rate weight (kSideRatePermille): w500, w750 (the
# tree), w1000; base is main. New stats bits by design: no hash gate. 3 alternating rounds of the
# mHC bench at T = 4096, 16384; the suite and both sanitizers on w750.
# (Rewritten after the call onto tools/gpu/ab_extras.sh's ab_mhc_bench: the same bench and
# checks; the call printed all of ab_stdout.txt.)
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc24
ab_mhc_bench $D "base w500 w750 w1000" w750 4096,16384
ab_pack; echo "== done at $(ab_el) s"
