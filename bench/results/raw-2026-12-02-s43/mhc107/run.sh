#!/usr/bin/env bash
# Call mhc107 (forty-third session): after mhc106, which Sinkhorn layout for the forwards'
# coefficient kernel, each with forward_prepare's coefficient kernel a programmatic dependent of
# the cluster kernel (mhc106's pdl). Against main (ca3eb55):
#   pdl16: main's 16 lanes a token (butterfly sums by shuffles) + the dependent launch;
#   pdlw0: one thread a token, warp 0 of each block (mhc106's w0 + the dependent launch);
#   pdl2: two lanes a token (lane h rows 2h, 2h + 1; a column's two halves added by one shuffle),
#         __launch_bounds__(512, 4) to stay at 32 registers (34 without: 3 blocks an SM);
#   pdlt: the 16 lanes below T = 8192, one thread a token (warp 0) from T = 8192 on.
# All give the same bits by construction (KEEP=0: the gate drops a variant that does not).
# Build (here; the variants' files: bench/results/raw-2026-12-02-s43/mhc107/*.diff against ca3eb55):
#   BUILD_DIR=/tmp/ab-build-main EXTRA=bench/results/raw-2026-12-02-s43/mhc107/run.sh \
#     bash tools/gpu/build_ab_carry.sh mhc107 mhc kernels/cuda/mhc_forward.cu base=git:ca3eb55 \
#     pdl16=/tmp/v107/pdl16.cu pdlw0=/tmp/v107/pdlw0.cu pdl2=/tmp/v107/pdl2.cu pdlt=/tmp/v107/pdlt.cu
# Device call: {"command": "bash bench/results/raw-2026-12-02-s43/mhc107/run.sh",
#   "carry": [".carry/mhc107x"], "timeout_s": 420}
ROUNDS=3 HIDE='backward_\|forward_finish' NCU_CLOCKS=none \
  bash tools/gpu/mhc_ab_call.sh mhc107 "base pdl16 pdlw0 pdl2 pdlt" "pdl16 pdl2 pdlt" 0 4096,8192,16384 'MhcFwdCoef' 2>&1 |
  grep -E "forward_|hash|Duration|DRAM|rc=|ERROR|error|FAIL|PASS|passed|failed|sanitizer|ERROR SUMMARY|RACECHECK|^---"
