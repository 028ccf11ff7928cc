#!/usr/bin/env bash
# mhc70 (thirty-third session): backward_finish's token kernel with 32-bit load offsets and two
# buffers refilled in turn (branch mhc-tok-addr, c5642a9) against main 91ac911. Bitwise the same by
# construction: the hash gate must be equal. 3 alternating bench rounds at T = 4096, 16384; suite
# and both sanitizers on addr; ncu of both token kernels.
# Built here: bash tools/gpu/build_ab_carry.sh mhc70 mhc kernels/cuda/mhc_backward.cu \
#   base=git:main addr=git:mhc-tok-addr
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc70/run.sh",
#   "carry": [".carry/mhc70x"], "timeout_s": 420}
set -uo pipefail
source tools/gpu/ab_extras.sh
tar xJf .carry/mhc70x/mhc70.tar.xz -C .carry
ab_call mhc70
HASH_FILTER='MhcKernels.*HashesForCrossBuildComparison' ab_mhc_bench $D "base addr" addr "4096,16384" 'forward_'
grep -h "EQUAL\|DIFFER\|dropped" $AB_OUT/ab/hash_gate.txt 2>/dev/null | head
for v in base addr; do
  timeout 60 ncu --kernel-name regex:MhcBwdToken --section SpeedOfLight --section Occupancy \
    $D/$v/cakegrad_mhc_bench --profile 2>&1 | grep -E "Duration|DRAM Through|Achieved Occ" | sed "s/^/$v /"
done
cp -r $AB_OUT/. ${OUT:-/tmp/out}/
echo "== done at $(ab_el) s"
