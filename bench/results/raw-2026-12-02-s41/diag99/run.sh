#!/usr/bin/env bash
# Call diag99 (forty-first session): timing-only diagnostics of forward_prepare's C = 4096 cluster
# kernel (wrong U by design; forward_stats is main's). diag98 found the MMA warps' multiply and the
# U warps' U each worth only ~6% (nomma, nou): the stage is bound by the X buffer's cycle (landed,
# multiplied, CTA sum, cluster phase, the U warps' sums, pre, U, refill) over 3 buffers.
#   early:       the MMA warps refill the buffer right after its MMAs (as forward_stats); the U
#                warps read whatever it then holds and refill nothing: the time the kernel would
#                take if the U warps kept their X in registers and freed the buffer at once
#   early_nomma: early, and the MMA warps skip every MMA
# Build (main fc13df8):
#   python3 bench/results/raw-2026-12-02-s41/diag98/make_variants.py /tmp/diag
#   EXTRA=bench/results/raw-2026-12-02-s41/diag99/run.sh bash tools/gpu/build_ab_carry.sh diag99 mhc
#   kernels/cuda/mhc_forward.cu base=tree early=/tmp/diag/early.cu early_nomma=/tmp/diag/early_nomma.cu
# Device call: {"command": "bash bench/results/raw-2026-12-02-s41/diag99/run.sh", "carry": [".carry/diag99x"]}
ROUNDS=3 HIDE='backward_\|forward_finish' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh diag99 \
  "base early early_nomma" "" 1 4096,16384 'MhcFwdCluster' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|DRAM|rc=|ERROR|error"
