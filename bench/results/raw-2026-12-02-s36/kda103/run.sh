#!/usr/bin/env bash
# Call kda103 (DIAGNOSTIC, timing only, wrong results by design): what the chunked KDA backward's
# split products cost. x1: Mma3 (BF16x3) and Mma6 (BF16x6) issue only the hi x hi MMA; x0: they
# issue none (kernels/cuda/kda_mma.cuh, branches diag-kda-x1 / diag-kda-x0, x1.diff / x0.diff).
# Both helpers serve the grad kernel, the reverse chain, the checkpoint preparation and the state
# pass; the explicitly written three-part dO products stay.
# Carry: bash tools/gpu/build_ab_carry.sh kda103 kda "kernels/cuda/kda_mma.cuh" base=git:main
#   x1=git:diag-kda-x1 x0=git:diag-kda-x0
# Device call: {"command": "bash bench/results/raw-2026-12-02-s36/kda103/run.sh",
#   "carry": [".carry/kda103x"], "timeout_s": 420}
tar xJf .carry/kda103x/kda103.tar.xz -C .carry
bash tools/gpu/kda_ab_call.sh .carry/kda103 "base x1 x0" 3 "" 1 2>&1 | tail -40
