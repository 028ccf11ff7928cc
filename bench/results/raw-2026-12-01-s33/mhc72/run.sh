#!/usr/bin/env bash
# mhc72 (thirty-third session): backward_finish, main 91ac911 against pre2 (mhc-tok-addr, 3140d18)
# and colst (mhc-col-store: pre2 + the column kernel's dX stores at a per-stage base and a 32-bit
# offset).
# Hash gate, 3 alternating bench rounds at T = 4096, 16384, the mHC suite and both sanitizers on
# CHECK, ncu of the token and column kernels. The call ran these steps as an inline script (git show
# c598d63:bench/results/raw-2026-12-01-s33/mhc72/run.sh); tools/gpu/mhc_ab_call.sh holds them now.
# Built here: bash tools/gpu/build_ab_carry.sh mhc72 mhc kernels/cuda/mhc_backward.cu \
#   base=git:91ac911 pre2=git:3140d18 colst=git:8a6db50
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc72/run.sh",
#   "carry": [".carry/mhc72x"],
#   "timeout_s": 540}
exec bash tools/gpu/mhc_ab_call.sh mhc72 "base pre2 colst" colst
