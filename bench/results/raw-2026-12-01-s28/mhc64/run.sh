#!/usr/bin/env bash
# mhc64: single-pass backward_finish, the sync warps' rate. base = main 65d05d6; l4 = a84a6d2;
# rot = 8cdac661e885d3e7013eab5600622f9508835e9c (finishing tokens rotated over the CTAs, 1 publishing + 2 finishing warps);
# rot2p = f1c82087ff05d078a62bebeab1dcf2a79c234759 (rotated, 2 publishing warps by stage parity, 1 finishing warp).
set -uo pipefail
C=.carry/mhc64
O=${OUT:-/tmp}/mhc64
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
for v in rot rot2p; do
  timeout 100 $C/$v/cakegrad_gpu_mhc_tests --gtest_filter='MhcKernels.SinglePassAndTwoPass*:*MhcKernelsAccuracy*T16384_C4096*:*MhcKernelsAccuracy*T4097*' > "$O/bitwise_$v.txt" 2>&1
  echo "$v bitwise+accuracy rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$O/bitwise_$v.txt" | tr '\n' ' ') at $(el) s"
done
for r in 1 2; do
  for v in base l4 rot rot2p; do
    timeout 40 $C/$v/cakegrad_mhc_bench > "$O/bench_${v}_$r.txt" 2>&1
    grep -E "^\| backward_finish " "$O/bench_${v}_$r.txt" | sed "s/^/r$r $v /" | cut -c1-100
  done
done
echo "== done at $(el) s"
