#!/usr/bin/env bash
# mhc80 (thirty-fourth session; prepared first, then run in its last call and merged as 5c00eef): the
# token kernel with the Sinkhorn chain's steps spread over the group loop (a share before each
# group's sums) instead of run as one block at the start, against main. At the bench's clocks the
# token kernel is latency-bound (tok_real/: long scoreboard 45%, the chain's lines 21% of the
# stall samples, the first buffer's sums 46%). The same steps in the same order: the hash gate
# must be equal. 128 registers at __launch_bounds__(128, 4), 32 B spilled outside the loop, none
# inside. The candidate is ilv.patch here (branch mhc-tok-ilv, dbfc9a3; local only). Build here:
#   git checkout -b mhc-tok-ilv main && git am bench/results/raw-2026-12-01-s34/mhc80/ilv.patch
#   git checkout main && bash tools/gpu/build_ab_carry.sh mhc80 mhc \
#     "kernels/cuda/mhc_backward.cu kernels/cuda/mhc_common.cuh" base=git:main ilv=git:mhc-tok-ilv
# Device call: {"command": "bash bench/results/raw-2026-12-01-s34/mhc80/run.sh",
#   "carry": [".carry/mhc80x"], "timeout_s": 420}
NCU_CLOCKS=none exec bash tools/gpu/mhc_ab_call.sh mhc80 "base ilv" ilv
