#!/usr/bin/env bash
# mhc45 (twenty-fourth session): the tensor maps' L2 promotion. probe1 read X at 3.88 TB/s with
# forward_stats' TMA ring and 256-byte promotion (every 128-byte box row fetched its neighbour's
# 128 bytes too: 25% more L2 sector lookups, 50% more fabric transfers) and at 4.37 TB/s without.
# base = main (256 B), p0 = no promotion, p128 = 128 B, for every map (kernels/cuda/tensor_map.h).
# 3 alternating rounds of the mHC bench at T = 4096, 16384 (every function); the suite and both
# sanitizers on p0; the backward hash gate (bits must not change).
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc45
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base p0 p128" p0 4096,16384 'zzzz'
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
