#!/usr/bin/env bash
# mhc63: single-pass backward_finish, slack of the dpre exchange. base = main 65d05d6; l3 = mhc62
# (0c9ac95: sums 3 stages ahead, 6 X/dU slots); l4 = a84a6d2 (4 stages ahead, 7 slots, ring 5);
# diag = l4 whose consumers do not wait for the records (e92cc8f: wrong results, timing only:
# the consumers' own rate). Bitwise test on l4, bench 3 rounds, ncu stall reasons of l4's kernel.
set -uo pipefail
C=.carry/mhc63
O=${OUT:-/tmp}/mhc63
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
timeout 120 $C/l4/cakegrad_gpu_mhc_tests --gtest_filter='MhcKernels.SinglePassAndTwoPass*:*MhcKernelsAccuracy*T16384_C4096*' > "$O/bitwise.txt" 2>&1
echo "l4 bitwise+accuracy rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$O/bitwise.txt" | tr '\n' ' ') at $(el) s"
for r in 1 2 3; do
  for v in base l3 l4 diag; do
    timeout 60 $C/$v/cakegrad_mhc_bench > "$O/bench_${v}_$r.txt" 2>&1
    grep -E "^\| backward_finish " "$O/bench_${v}_$r.txt" | sed "s/^/r$r $v /" | cut -c1-100
  done
done
timeout 120 ncu --kernel-name regex:"MhcBwdFused" --section WarpStateStats --section SchedulerStats --metrics smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_membar,smsp__pcsamp_warps_issue_stalled_sleeping,smsp__pcsamp_warps_issue_stalled_mio_throttle,smsp__pcsamp_warps_issue_stalled_short_scoreboard,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_warps_issue_stalled_math_pipe_throttle,smsp__pcsamp_warps_issue_stalled_selected,smsp__pcsamp_warps_issue_stalled_not_selected,smsp__pcsamp_warps_issue_stalled_dispatch_stall,smsp__pcsamp_warps_issue_stalled_branch_resolving,smsp__pcsamp_warps_issue_stalled_no_instructions,smsp__pcsamp_warps_issue_stalled_imc_miss,smsp__pcsamp_warps_issue_stalled_tex_throttle,smsp__pcsamp_warps_issue_stalled_drain,smsp__pcsamp_warps_issue_stalled_misc $C/l4/cakegrad_mhc_bench --profile > "$O/ncu_l4.txt" 2>&1
echo "ncu rc=$?"
grep -E "Duration|pcsamp|Warp Cycles Per Issued|Eligible|Issued Warp" "$O/ncu_l4.txt" | head -40
echo "== done at $(el) s"
