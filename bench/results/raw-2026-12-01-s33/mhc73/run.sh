#!/usr/bin/env bash
# mhc73 (thirty-third session): backward_finish, main 91ac911 against colst (mhc72's: the token
# kernel's loads and the column kernel's dX stores) and imm (mhc-col-imm: colst + the column
# kernel's epilogue reads as lane offsets plus constants). Bitwise the same (hash gate). 3
# alternating rounds; suite and sanitizers on imm; ncu of the token and column kernels of each.
# Built here: bash tools/gpu/build_ab_carry.sh mhc73 mhc kernels/cuda/mhc_backward.cu
#   base=git:main colst=git:mhc-col-store imm=git:mhc-col-imm
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc73/run.sh",
#   "carry": [".carry/mhc73x"], "timeout_s": 480}
set -uo pipefail
source tools/gpu/ab_extras.sh
tar xJf .carry/mhc73x/mhc73.tar.xz -C .carry
ab_call mhc73
HASH_FILTER='MhcKernels.*HashesForCrossBuildComparison' ab_mhc_bench $D "base colst imm" imm "4096,16384" 'forward_'
grep -h "EQUAL\|DIFFER\|dropped" $AB_OUT/ab/hash_gate.txt 2>/dev/null | head
for v in base colst imm; do
  timeout 60 ncu --kernel-name regex:MhcBwd[TC][oo] --section SpeedOfLight --section Occupancy \
    $D/$v/cakegrad_mhc_bench --profile 2>&1 | grep -E "Duration|DRAM Through|Achieved Occ" | sed "s/^/$v /"
done
cp -r $AB_OUT/. ${OUT:-/tmp/out}/
echo "== done at $(ab_el) s"
