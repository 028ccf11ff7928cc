#!/usr/bin/env bash
# Thirty-fifth session, call mhc82: pdl2 (the column kernel as the token kernel's programmatic
# dependent, its first stages' inputs requested before griddepcontrol.wait, the records after it;
# no counters: pdl2.patch) and l2x (DIAGNOSTIC, timing only: the column kernel reads X and dU from
# tokens 0..511, which stay in L2: l2x.patch). Carry:
# tools/gpu/build_ab_carry.sh mhc82 mhc "kernels/cuda/mhc_backward.cu kernels/reference/mhc_layout.h
#   kernels/reference/mhc_workspace.cc" base=git:main pdl2=git:mhc-pdl2 l2x=git:mhc-l2x
# Device call (as run): {"command": "NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc82 \"base pdl2
#   l2x\" \"pdl2\" 1 2>&1 | grep -v rel-L2 | tail -45", "carry": [".carry/mhc82x"], "timeout_s": 300}
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc82 "base pdl2 l2x" "pdl2" 1
