#!/usr/bin/env bash
# mhc79 (thirty-fourth session): two bitwise-neutral changes against main (6a4704f), after the clk
# profile showed both backward_finish kernels memory-side bound at the bench's clocks:
#   l2p   the token kernel's 16-byte loads with the L2 256-byte prefetch hint (l2p.diff; the SASS
#         differs only in LDG.E.LTC256B);
#   both  l2p + the column kernel's chunks placed last first, so that its first wave starts on the
#         tokens the token kernel read last (rev.diff; the chunk index and the partials' order are
#         unchanged).
# Build here:
#   bash tools/gpu/build_ab_carry.sh mhc79 mhc kernels/cuda/mhc_backward.cu base=git:main \
#     l2p=git:mhc-l2p both=git:mhc-both
# Device call: {"command": "bash bench/results/raw-2026-12-01-s34/mhc79/run.sh",
#   "carry": [".carry/mhc79x"], "timeout_s": 420}
exec bash tools/gpu/mhc_ab_call.sh mhc79 "base l2p both" both
