#!/usr/bin/env bash
# mhc40 (twenty-third session): main's split-K forward_stats as merged (d36efaf: mhc37's cand4
# with the cluster form without U removed) against the main it replaced (ad72d46). 3 alternating
# rounds of the mHC bench at T = 4096, 8192, 16384 (every function: forward_prepare's cluster
# kernel was recompiled); the suite and both sanitizers on cand; the backward hash gate.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc40
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base cand" cand 4096,8192,16384 'backward_prepare'
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
