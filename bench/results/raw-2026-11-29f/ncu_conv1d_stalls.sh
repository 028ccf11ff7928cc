#!/usr/bin/env bash
# Sixth session, second look: the stall reasons of the same "bf16" conv1d backward launch as
# ncu_conv1d_run.sh (32768 x 4096, bias, 16-byte route). Output in $OUT.
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
B=.carry/gpu/bin/cakegrad_conv1d_bench
timeout 150 ncu --clock-control none -k regex:Conv1dBwdMainKernel --launch-skip 10 -c 1 \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld\.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_ldgsts.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum' \
  --section WarpStateStats --print-details all "$B" > "$OUT/ncu_conv1d_stalls.txt" 2>&1
echo "rc=$?"
grep -E "stalled|bank|wavefronts|ldgsts|sectors|requests" "$OUT/ncu_conv1d_stalls.txt" | sort -t' ' -k3 | head -60
