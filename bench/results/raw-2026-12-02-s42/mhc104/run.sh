#!/usr/bin/env bash
# Call mhc104 (forty-second session): forward_stats' split-K grid on all 132 SMs. Main launches 8
# whole rank sets (128 CTAs, 64 stages each at T = 16384); `tail` adds the 4 CTAs past them, which
# walk the last 15 token groups rank by rank (reloading fn's fragments where the rank changes), so
# that no CTA walks more than 63 stages. Same bits by construction (each (rank, group) item is
# computed as any CTA computes it): the hash gate must hold (KEEP=0). forward_prepare's SASS is
# identical in both (checked here with tools/gpu/sass_compare.sh, the kernel name aside).
# Build (here, branch mhc-splitk132):
#   BUILD_DIR=/tmp/ab-build-main EXTRA=bench/results/raw-2026-12-02-s42/mhc104/run.sh \
#     bash tools/gpu/build_ab_carry.sh mhc104 mhc kernels/cuda/mhc_forward.cu base=git:bb66b62 tail=tree
# Device call: {"command": "bash bench/results/raw-2026-12-02-s42/mhc104/run.sh",
#   "carry": [".carry/mhc104x"], "timeout_s": 200}
ROUNDS=3 HIDE='backward_\|forward_finish' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc104 \
  "base tail" "tail" 0 4096,16384 'MhcFwdCluster' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|DRAM|rc=|ERROR|error|hazard|rel-L2 T=16384|Tail"
