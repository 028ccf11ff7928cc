#!/usr/bin/env bash
# Call mhc105 (forty-second session, timing only): why mhc104's tail made forward_stats' split-K
# kernel 14% slower. tail0 is mhc104's code with the host's tail forced to 0 (the code's own cost,
# the grid of main); tailnr is mhc104 without the reload of fn's fragments where a tail CTA's
# rank changes (wrong stats for the tail's later ranks: timing only, KEEP=1).
# Build (here, branch mhc-splitk132 at its candidate commit; /tmp/diag from mhc_forward.cu by
# replacing the host's tail with 0, and by dropping load_fa in the split-K loop):
#   BUILD_DIR=/tmp/ab-build-main EXTRA=bench/results/raw-2026-12-02-s42/mhc105/run.sh \
#     bash tools/gpu/build_ab_carry.sh mhc105 mhc kernels/cuda/mhc_forward.cu base=git:bb66b62 \
#     tail=tree tail0=/tmp/diag/tail0.cu tailnr=/tmp/diag/tailnr.cu
# Device call: {"command": "bash bench/results/raw-2026-12-02-s42/mhc105/run.sh",
#   "carry": [".carry/mhc105x"], "timeout_s": 200}
ROUNDS=3 HIDE='backward_\|forward_finish\|forward_prepare' NCU_CLOCKS=none \
  bash tools/gpu/mhc_ab_call.sh mhc105 "base tail tail0 tailnr" "" 1 4096,16384 'MhcFwdCluster' 2>&1 |
  grep -E "forward_|hashes|Duration|DRAM|rc=|ERROR|error"
