#!/usr/bin/env bash
# mhc72 (thirty-third session): backward_finish, main 91ac911 against pre2 (mhc-tok-addr, 3140d18:
# the token kernel's 32-bit load offsets, buffers refilled in turn, groups 0 and 1 before the
# Sinkhorn chain) and colst (mhc-col-store: pre2 + the column kernel's dX stores at a per-stage base
# and a 32-bit offset). Bitwise the same (hash gate). 3 alternating rounds; suite and sanitizers on
# colst; ncu of the token and column kernels of each.
# Built here: bash tools/gpu/build_ab_carry.sh mhc72 mhc kernels/cuda/mhc_backward.cu
#   base=git:main pre2=git:mhc-tok-addr colst=git:mhc-col-store
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc72/run.sh",
#   "carry": [".carry/mhc72x"], "timeout_s": 480}
set -uo pipefail
source tools/gpu/ab_extras.sh
tar xJf .carry/mhc72x/mhc72.tar.xz -C .carry
ab_call mhc72
HASH_FILTER='MhcKernels.*HashesForCrossBuildComparison' ab_mhc_bench $D "base pre2 colst" colst "4096,16384" 'forward_'
grep -h "EQUAL\|DIFFER\|dropped" $AB_OUT/ab/hash_gate.txt 2>/dev/null | head
for v in base pre2 colst; do
  timeout 60 ncu --kernel-name regex:MhcBwd[TC][oo] --section SpeedOfLight --section Occupancy \
    $D/$v/cakegrad_mhc_bench --profile 2>&1 | grep -E "Duration|DRAM Through|Achieved Occ" | sed "s/^/$v /"
done
cp -r $AB_OUT/. ${OUT:-/tmp/out}/
echo "== done at $(ab_el) s"
