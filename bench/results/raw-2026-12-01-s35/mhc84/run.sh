#!/usr/bin/env bash
# Thirty-fifth session, call mhc84: the column kernel as the token kernel's programmatic dependent,
# three forms, at T = 4096, 8192, 16384 (3 alternating rounds): pdl2 (mhc82's: the first stages'
# X, dY, dU and stats requested before griddepcontrol.wait), pdl3 (nothing requested before it),
# pdl4 (pdl3, and the token kernel never triggers: the column CTAs are placed as its CTAs exit).
# Carry: tools/gpu/build_ab_carry.sh mhc84 mhc "kernels/cuda/mhc_backward.cu
#   kernels/reference/mhc_layout.h kernels/reference/mhc_workspace.cc" base=git:main
#   pdl2=git:mhc-pdl2 pdl3=git:mhc-pdl3 pdl4=git:mhc-pdl4
# Device call: {"command": "bash bench/results/raw-2026-12-01-s35/mhc84/run.sh",
#   "carry": [".carry/mhc84x"], "timeout_s": 420}
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc84 "base pdl2 pdl3 pdl4" "pdl3 pdl4" 0 \
  4096,8192,16384 2>&1 | grep -E "backward_finish|PASSED|FAILED|SUMMARY|hashes|Duration|rc="
