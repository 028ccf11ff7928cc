#!/usr/bin/env bash
# Call mhc106 (forty-third session): the forwards' coefficient kernel with its Sinkhorn one thread
# a token (branch mhc-coef-thread) against main (ca3eb55). cand: the block's 32 tokens' logits go
# through shared memory to one warp, the warp chosen by the block's quarter of the grid; pdl: cand
# + forward_prepare's coefficient kernel a programmatic dependent of the cluster kernel (triggered
# at each CTA's last stage, as forward_stats' is by the split-K kernel); w0: cand with warp 0 in
# every block (whether the choice matters). Same bits expected (KEEP=0); suite and sanitizers on pdl.
# Variant diffs against ca3eb55 beside this script (cand.diff, pdl.diff, w0.diff; a9dffde and
# 9d3416e are on branch mhc-coef-thread).
# Build (here):
#   BUILD_DIR=/tmp/ab-build-main EXTRA=bench/results/raw-2026-12-02-s43/mhc106/run.sh \
#     bash tools/gpu/build_ab_carry.sh mhc106 mhc kernels/cuda/mhc_forward.cu base=git:ca3eb55 \
#     cand=git:a9dffde pdl=git:9d3416e w0=/tmp/mhc106_w0.cu   (the branch's second commit;
#     /tmp/mhc106_w0.cu is a9dffde's file with SinkhornWarp() returning 0)
# Device call: {"command": "bash bench/results/raw-2026-12-02-s43/mhc106/run.sh",
#   "carry": [".carry/mhc106x"], "timeout_s": 420}
ROUNDS=3 HIDE='backward_\|forward_finish' NCU_CLOCKS=none \
  bash tools/gpu/mhc_ab_call.sh mhc106 "base cand pdl w0" "pdl" 0 4096,8192,16384 'MhcFwdCoef|MhcFwdCluster' 2>&1 |
  grep -E "forward_|hash|Duration|DRAM|rc=|ERROR|error|FAIL|PASS|passed|failed|sanitizer|ERROR SUMMARY|RACECHECK"
