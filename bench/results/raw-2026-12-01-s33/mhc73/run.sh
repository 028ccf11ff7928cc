#!/usr/bin/env bash
# mhc73 (thirty-third session): backward_finish, main 91ac911 against colst (mhc72's) and imm
# (mhc-col-imm: colst + the column kernel's epilogue reads as lane offsets plus constants).
# Hash gate, 3 alternating bench rounds at T = 4096, 16384, the mHC suite and both sanitizers on
# CHECK, ncu of the token and column kernels. The call ran these steps as an inline script (git show
# c598d63:bench/results/raw-2026-12-01-s33/mhc73/run.sh); tools/gpu/mhc_ab_call.sh holds them now.
# Built here: bash tools/gpu/build_ab_carry.sh mhc73 mhc kernels/cuda/mhc_backward.cu \
#   base=git:91ac911 colst=git:8a6db50 imm=git:65ec53d
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc73/run.sh",
#   "carry": [".carry/mhc73x"],
#   "timeout_s": 540}
exec bash tools/gpu/mhc_ab_call.sh mhc73 "base colst imm" imm
