#!/usr/bin/env bash
# kda8 call 1: main's KDA binaries (f19a170 = main's KDA sources): copy rate, forward bench,
# per-kernel ncu times / instructions / DRAM bytes at all three shapes, then --set full of one
# preparation and one state-pass launch at (1, 8192, 32) with the SASS source page.
set -uo pipefail
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
O=$(mktemp -d)
pack() { tar czf "$FINAL/logs.tgz" -C "$O" .; }
D=.carry/kda8
export PATH=$PATH:/usr/local/cuda/bin
START=$(date +%s)
el() { echo $(($(date +%s) - START)); }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; ncu --version | tail -1; } | tee "$O/env.txt"
timeout 10 $D/copybw | tee "$O/copy.txt"
KDA_BENCH_FWD_ONLY=1 timeout 25 $D/main_bench > "$O/bench_fwd_main.txt" 2>&1; echo "bench rc=$? at $(el) s"
grep -E "median" "$O/bench_fwd_main.txt"
pack
M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__cycles_active.avg
KDA_BENCH_FWD_ONLY=1 timeout 70 ncu --clock-control none --metrics $M -k regex:KdaChunk --csv $D/main_bench > "$O/kernels_metrics.csv" 2>"$O/kernels_metrics.err"; echo "metrics rc=$? at $(el) s"
pack
for k in Prep State; do
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=0 timeout 45 ncu --clock-control none --set full --import-source no -k regex:KdaChunk$k --launch-skip 3 -c 1 -o /tmp/k8_$k $D/main_bench > "$O/ncu_$k.log" 2>&1
  echo "ncu $k rc=$? at $(el) s"
  ncu -i /tmp/k8_$k.ncu-rep --page details > "$O/details_$k.txt" 2>&1
  ncu -i /tmp/k8_$k.ncu-rep --page source --csv --print-source sass > "$O/src_$k.csv" 2>&1
  pack
done
ls -la "$O"
echo "== done at $(el) s"
