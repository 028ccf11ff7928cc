#!/usr/bin/env bash
# mhc74 (thirty-third session): backward_finish's column kernel, instruction cuts on top of imm
# (mhc73): loop (the stage's slot, parity and dX base carried across stages), pred (+ rows past
# the chunk computed and their stores predicated), ord (+ dX's terms as one FMA chain a channel:
# new dX bits by design, KEEP=1). Against main 91ac911.
# Hash gate, 3 alternating bench rounds at T = 4096, 16384, the mHC suite and both sanitizers on
# CHECK, ncu of the token and column kernels. The call ran these steps as an inline script (git show
# c598d63:bench/results/raw-2026-12-01-s33/mhc74/run.sh); tools/gpu/mhc_ab_call.sh holds them now.
# Built here: bash tools/gpu/build_ab_carry.sh mhc74 mhc kernels/cuda/mhc_backward.cu \
#   base=git:91ac911 imm=git:65ec53d loop=git:1c8cd59 pred=git:f31ef3e ord=git:8e9f5a2
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc74/run.sh",
#   "carry": [".carry/mhc74x"],
#   "timeout_s": 540}
exec bash tools/gpu/mhc_ab_call.sh mhc74 "base imm loop pred ord" "pred ord" 1
