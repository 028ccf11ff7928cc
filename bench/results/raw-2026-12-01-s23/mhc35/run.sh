#!/usr/bin/env bash
# mhc35 (twenty-third session): forward_stats without the cluster. Each CTA is a cluster kernel
# CTA of one k-slice rank (CTA b plays rank b % 16 of group b / 16), with its own token stages, no
# cluster barrier, on every SM (128 CTAs instead of 7 clusters x 16 = 112); its CTA sums go to the
# forward workspace and a fold kernel sums the 16 ranks in order, as the cluster sum does. stats
# must stay bitwise forward_prepare's (the suite's check) and the backward hash gate (stats from
# forward_stats) must hold. 3 alternating rounds of the mHC bench at T = 4096, 8192, 16384; the
# suite and both sanitizers on cand.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc35
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base cand" cand 4096,8192,16384
cat "$AB_OUT/ab/hash_gate.txt" "$AB_OUT/ab/hashes_base.txt"
ab_pack; echo "== done at $(ab_el) s"
