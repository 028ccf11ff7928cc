#!/usr/bin/env bash
# PREPARED IN THE THIRTY-FIFTH SESSION, NEVER RUN ON A DEVICE (no device time was left).
# Call mhc85: backward_finish's column kernel in 2-CTA clusters (mcast.patch, branch mhc-mcast):
# the two column blocks of a pair need the same record and stats tiles every stage, so each CTA
# copies one of the two into both by TMA multicast (L2 serves them once a pair instead of twice),
# with an "empty" mbarrier a slot on which the peer announces it is done with the slot before the
# other CTA's copy into it. Why: the column kernel is bound by L2 throughput (88.7%; l2x and lds
# in this folder's siblings), and the two tiles, read by all 64 column CTAs of a chunk, are ~13% of
# its L2 traffic (8 KB of ~60 KB a CTA and stage, 128-byte rows); the pair halves that. Expected:
# the column kernel a few percent faster if L2 stays the bound; outputs bitwise main's (the same
# bytes land in the same places). 128 registers, 8 bytes of stack (one value reloaded a stage).
# Rebuild the carry (the patch applies to main 0e44c86 and later):
#   git checkout -b mhc-mcast && git apply bench/results/raw-2026-12-01-s35/mhc85-ready/mcast.patch
#   && git commit -qam mcast && git checkout main
#   bash tools/gpu/build_ab_carry.sh mhc85 mhc "kernels/cuda/mhc_backward.cu
#     kernels/cuda/cluster_sync.cuh kernels/cuda/kda_mma.cuh kernels/cuda/mhc_tensor_map.h"
#     base=git:main mcast=git:mhc-mcast
# Device call: {"command": "bash bench/results/raw-2026-12-01-s35/mhc85-ready/run.sh",
#   "carry": [".carry/mhc85x"], "timeout_s": 400}
# Checks to read: the hash gate (mcast must equal base: every hash line), the suite (23/23),
# memcheck and racecheck on mcast (synccheck would be worth adding: cluster barriers), the times
# at T = 4096 / 16384 and ncu's L2 throughput of the column kernel. If it hangs (a barrier
# protocol bug), the suite's timeout ends it. The KDA kernels include the moved MbarArrivePeer:
# if merged, the final build's KDA suite covers them.
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc85 "base mcast" "mcast" 2>&1 |
  grep -E "backward_finish|PASSED|FAILED|SUMMARY|hashes|Duration|Throughput|rc="
