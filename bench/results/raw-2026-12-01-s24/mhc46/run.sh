#!/usr/bin/env bash
# mhc46 (twenty-fourth session): where forward_stats' and forward_prepare's time goes without L2
# promotion (mhc45's p0): ncu per kernel at T = 16384 (the bench's second call of each; clocks and
# caches not controlled, as mhc42), for base and p0.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc46
D=.carry/mhc45
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex.sum
M=$M,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_tex_lookup_hit.sum
M=$M,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,sm__throughput.avg.pct_of_peak_sustained_elapsed
prof() {  # VARIANT TAG REGEX
  MHC_BENCH_T=16384 timeout 120 ncu --clock-control none --cache-control none --metrics "$M" \
    --kernel-name-base demangled -k "regex:$3" --launch-skip 1 -c 1 $D/$1/cakegrad_mhc_bench \
    > "$AB_OUT/ncu_$1_$2.txt" 2>&1
  echo "== $1 $2"; grep -E "^    [a-z]" "$AB_OUT/ncu_$1_$2.txt" | sed -E 's/ +/ /g'
}
for v in base p0; do
  prof $v splitk 'MhcFwdClusterKernel<.*bool.0>'
  prof $v coef_fold 'MhcFwdCoefKernel<.*bool.1>'
  prof $v cluster_u 'MhcFwdClusterKernel<.*bool.1>'
done
ab_pack; echo "== done at $(ab_el) s"
