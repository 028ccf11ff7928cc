#!/usr/bin/env bash
# Thirty-fifth session, call mhc81: the column kernel launched as the token kernel's programmatic
# dependent, its CTAs waiting on per-chunk ready counts (pdl.patch, branch mhc-pdl f30fc33).
# Carry: tools/gpu/build_ab_carry.sh mhc81 mhc "kernels/cuda/mhc_backward.cu
#   kernels/reference/mhc_layout.h kernels/reference/mhc_workspace.cc" base=git:main pdl=git:f30fc33
# Device call (as run): {"command": "NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc81 \"base pdl\"
#   \"pdl\" 2>&1 | tail -45", "carry": [".carry/mhc81x"], "timeout_s": 300}
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc81 "base pdl" "pdl"
