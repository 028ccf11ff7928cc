#!/usr/bin/env bash
# mhc42 (twenty-third session): where the split-K stats kernel's L2 throughput (90% in mhc41)
# goes: L2 sectors by source unit (SMs' TEX path vs the fabric between the two L2 partitions),
# against DRAM bytes, for main's split-K kernel and forward_prepare's cluster kernel at
# T = 16384 (the bench's second call; clocks not locked, caches not flushed).
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc42
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors.sum
M=$M,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_ltcfabric.sum
M=$M,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
M=$M,lts__t_sectors_srcunit_tex_lookup_hit.sum,lts__t_sectors_srcunit_tex_lookup_miss.sum
M=$M,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
for tag in 0 1; do
  MHC_BENCH_T=16384 timeout 120 ncu --clock-control none --cache-control none --metrics "$M" \
    --kernel-name-base demangled -k "regex:MhcFwdClusterKernel<.*bool.$tag>" --launch-skip 1 -c 1 \
    $D/base/cakegrad_mhc_bench > "$AB_OUT/ncu_$tag.txt" 2>&1
  echo "== template argument $tag"
  grep -E "^    [a-z]" "$AB_OUT/ncu_$tag.txt" | sed -E 's/ +/ /g'
done
ab_pack; echo "== done at $(ab_el) s"
