#!/usr/bin/env bash
# Call mhc105 (forty-second session, timing only): why mhc104's tail made forward_stats' split-K
# kernel 14% slower. tail0 is mhc104's code with the host's tail forced to 0 (the code's own cost,
# the grid of main); tailnr is mhc104 without the reload of fn's fragments where a tail CTA's
# rank changes (wrong stats for the tail's later ranks: timing only, KEEP=1); tailinc is mhc104
# with the tail's rank and group from 32-bit divisions (64-bit ones are calls of ~70 instructions,
# made by every thread each stage) and two stages counted a reload (tail 14: 56 items a tail CTA).
# Build (here, on main after 75a7408; /tmp/diag/tail.cu is mhc_forward.cu of branch mhc-splitk132,
# and the others are made from it: the host's tail multiplied by 0; load_fa dropped from the
# split-K loop; Rank / Group in 32 bits and SplitKTail's moves doubled; diffs in this folder):
#   BUILD_DIR=/tmp/ab-build-main EXTRA=bench/results/raw-2026-12-02-s42/mhc105/run.sh \
#     bash tools/gpu/build_ab_carry.sh mhc105 mhc kernels/cuda/mhc_forward.cu base=git:bb66b62 \
#     tail=/tmp/diag/tail.cu tail0=/tmp/diag/tail0.cu tailnr=/tmp/diag/tailnr.cu \
#     tailinc=/tmp/diag/tailinc.cu
# Device call: {"command": "bash bench/results/raw-2026-12-02-s42/mhc105/run.sh",
#   "carry": [".carry/mhc105x"], "timeout_s": 200}
ROUNDS=2 HIDE='backward_\|forward_finish\|forward_prepare' NCU_CLOCKS=none \
  bash tools/gpu/mhc_ab_call.sh mhc105 "base tail tail0 tailnr tailinc" "" 1 16384 'MhcFwdCluster' 2>&1 |
  grep -E "forward_|hashes|Duration|DRAM|rc=|ERROR|error"
