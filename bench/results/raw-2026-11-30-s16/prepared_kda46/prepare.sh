#!/usr/bin/env bash
# Next session, here (development machine), from the repo root: builds the A/B carry of the
# prepared staging candidate st2 against main's grad kernel. CPU-checked only: host emulator hashes
# equal main's (bitwise by construction), 128 registers, no spills, 8856 SASS instructions (main
# 8864); never run on a device.
#   bash bench/results/raw-2026-11-30-s16/prepared_kda46/prepare.sh
# Then one device call (~5 min with the cold start): {"command": "tar xJf
# .carry/kda46x/kda46.tar.xz -C .carry && bash .carry/kda46/run.sh", "carry": [".carry/kda46x"],
# "timeout_s": 480}.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
P=bench/results/raw-2026-11-30-s16/prepared_kda46
F=kernels/cuda/kda_chunked_backward.cu
tmp=$(mktemp -d)
git show "HEAD:$F" > "$tmp/st2.cu"
patch -s "$tmp/st2.cu" < "$P/st2_staging_cp_async.diff"
EXTRA="$P/run.sh" bash tools/gpu/build_ab_carry.sh kda46 kda "$F" base=git:HEAD st2="$tmp/st2.cu"
