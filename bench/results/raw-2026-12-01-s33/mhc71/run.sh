#!/usr/bin/env bash
# mhc71 (thirty-third session): what limits backward_finish's token kernel. Variants against main
# 91ac911: addr (mhc70's, c5642a9), o5 (addr at __launch_bounds__(128, 5): 5 CTAs an SM, 96
# registers, 88 B of spills), pre2 (addr with the second buffer's load before the Sinkhorn chain).
# All bitwise the same (hash gate). 3 alternating rounds; suite and sanitizers on pre2.
# Built here: bash tools/gpu/build_ab_carry.sh mhc71 mhc kernels/cuda/mhc_backward.cu
#   base=git:main addr=git:mhc-tok-addr o5=/tmp/v_o5.cu pre2=/tmp/v_pre2.cu
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc71/run.sh",
#   "carry": [".carry/mhc71x"], "timeout_s": 480}
set -uo pipefail
source tools/gpu/ab_extras.sh
tar xJf .carry/mhc71x/mhc71.tar.xz -C .carry
ab_call mhc71
HASH_FILTER='MhcKernels.*HashesForCrossBuildComparison' ab_mhc_bench $D "base addr o5 pre2" pre2 "4096,16384" 'forward_'
grep -h "EQUAL\|DIFFER\|dropped" $AB_OUT/ab/hash_gate.txt 2>/dev/null | head
for v in base addr o5 pre2; do
  timeout 60 ncu --kernel-name regex:MhcBwdToken --section SpeedOfLight --section Occupancy \
    $D/$v/cakegrad_mhc_bench --profile 2>&1 | grep -E "Duration|DRAM Through|Achieved Occ" | sed "s/^/$v /"
done
cp -r $AB_OUT/. ${OUT:-/tmp/out}/
echo "== done at $(ab_el) s"
