#!/usr/bin/env bash
# mhc32 (twenty-second session): the forwards' coefficient kernel beside the cluster kernel. Each
# cluster CTA counts a stage's m and r written (a GPU-scope release by its last MMA warp, after the
# block barrier that orders the writers); the coefficient kernel, launched programmatically after
# the cluster kernel (64 CTAs walking the stages), finishes a stage's records once its 16 CTAs
# counted it, instead of all records after the cluster kernel's end (~9 us at T = 16384 by mhc27's
# stamps). Same arithmetic a record: the hash gate (MhcKernels backward hashes, stats from the GPU
# forward) must hold. 3 alternating rounds of the mHC bench at T = 4096, 8192, 16384; the suite
# and both sanitizers on cand.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc32
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base cand" cand 4096,8192,16384
cat "$AB_OUT/ab/hash_gate.txt" "$AB_OUT/ab/hashes_base.txt"
ab_pack; echo "== done at $(ab_el) s"
