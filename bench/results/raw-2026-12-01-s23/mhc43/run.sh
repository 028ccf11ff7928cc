#!/usr/bin/env bash
# mhc43 (twenty-third session): backward_finish's token and column kernels at T = 16384: time,
# DRAM and L2 throughput, L2 lookups from the fabric, SM activity (avg against max: the tail),
# achieved occupancy and waves (ncu, clocks and caches not controlled, the bench's second call).
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc43
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex.sum
M=$M,lts__t_sectors_srcunit_ltcfabric.sum,sm__cycles_active.avg,sm__cycles_active.max
M=$M,gpc__cycles_elapsed.max,sm__warps_active.avg.pct_of_peak_sustained_active
M=$M,launch__waves_per_multiprocessor,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
M=$M,dram__bytes_read.sum,dram__bytes_write.sum
for k in MhcBwdTokenKernel MhcBwdColumnsTcKernel; do
  MHC_BENCH_T=16384 timeout 120 ncu --clock-control none --cache-control none --metrics "$M" \
    -k "regex:$k" --launch-skip 1 -c 1 $D/base/cakegrad_mhc_bench > "$AB_OUT/ncu_$k.txt" 2>&1
  echo "== $k"
  grep -E "^    [a-z]" "$AB_OUT/ncu_$k.txt" | sed -E 's/ +/ /g'
done
ab_pack; echo "== done at $(ab_el) s"
