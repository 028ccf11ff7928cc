#!/usr/bin/env bash
# PREPARED IN THE THIRTY-FIFTH SESSION, NEVER RUN ON A DEVICE (no device time was left).
# Call mhc85: backward_finish's column kernel in clusters of adjacent column blocks of one chunk
# (mcast: 2 CTAs, mcast.patch, branch mhc-mcast; mcast4: 4 CTAs, mcast4_on_mcast.patch on top,
# branch mhc-mcast4). All column CTAs of a chunk need the same record and stats tiles every
# stage; ranks 0 and 1 each copy one of the two into every CTA of the cluster by TMA multicast
# (L2 serves them once a cluster), and a per-slot "empty" mbarrier of each copying rank, on which
# every other CTA arrives once its block barrier has passed, guards each refill.
# Why: the column kernel is bound by L2 throughput (88.7%; calls l2x / lds of this session), and
# the two tiles, read by all 64 column CTAs of a chunk, are ~13% of its L2 traffic (8 KB of ~60 KB
# a CTA and stage, as 128-byte rows). Pairs halve that, clusters of 4 quarter it (4-CTA clusters
# may leave a few SMs idle). Expected: the column kernel a few percent faster if L2 stays the
# bound; every output bitwise main's (the same bytes land in the same places). Both builds: 128
# registers, 8 bytes of stack (one value reloaded a stage).
# Rebuild the carry (the patches apply to main f971055 and later, until mhc_backward.cu changes):
#   git checkout -b mhc-mcast main && git apply bench/results/raw-2026-12-01-s35/mhc85-ready/mcast.patch
#   && git commit -qam mcast && git checkout -b mhc-mcast4 && git apply
#   bench/results/raw-2026-12-01-s35/mhc85-ready/mcast4_on_mcast.patch && git commit -qam mcast4
#   && git checkout main
#   bash tools/gpu/build_ab_carry.sh mhc85 mhc "kernels/cuda/mhc_backward.cu
#     kernels/cuda/cluster_sync.cuh kernels/cuda/kda_mma.cuh kernels/cuda/mhc_tensor_map.h"
#     base=git:main mcast=git:mhc-mcast mcast4=git:mhc-mcast4
# Device call: {"command": "bash bench/results/raw-2026-12-01-s35/mhc85-ready/run.sh",
#   "carry": [".carry/mhc85x"], "timeout_s": 480}
# Read: the hash gate (each must equal base on every line), the suite (23/23), memcheck and
# racecheck on both (compute-sanitizer --tool synccheck would be worth a run too: cluster
# barriers), the times at T = 4096 / 16384 and ncu's L2 throughput of the column kernel. A hang
# (a barrier-protocol bug) ends at the suite's timeout. The KDA kernels include the moved
# MbarArrivePeer (identical asm): if merged, the final build's KDA suite covers them.
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc85 "base mcast mcast4" "mcast mcast4" 2>&1 |
  grep -E "backward_finish|PASSED|FAILED|SUMMARY|hashes|Duration|Throughput|rc="
