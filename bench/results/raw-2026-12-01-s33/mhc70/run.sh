#!/usr/bin/env bash
# mhc70 (thirty-third session): backward_finish's token kernel with 32-bit load offsets and two
# buffers refilled in turn (branch mhc-tok-addr, c5642a9) against main 91ac911.
# Hash gate, 3 alternating bench rounds at T = 4096, 16384, the mHC suite and both sanitizers on
# CHECK, ncu of the token and column kernels. The call ran these steps as an inline script (git show
# c598d63:bench/results/raw-2026-12-01-s33/mhc70/run.sh); tools/gpu/mhc_ab_call.sh holds them now.
# Built here: bash tools/gpu/build_ab_carry.sh mhc70 mhc kernels/cuda/mhc_backward.cu \
#   base=git:91ac911 addr=git:c5642a9
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc70/run.sh",
#   "carry": [".carry/mhc70x"],
#   "timeout_s": 540}
exec bash tools/gpu/mhc_ab_call.sh mhc70 "base addr" addr
