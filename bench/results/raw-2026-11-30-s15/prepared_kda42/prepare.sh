#!/usr/bin/env bash
# Next session, here (development machine), from the repo root: builds the A/B carry of the two
# prepared back-substitution candidates against main's grad kernel (CPU-checked only: host
# emulator hashes equal main's, 128 registers, no spills; never run on a device).
#   bash bench/results/raw-2026-11-30-s15/prepared_kda42/prepare.sh
# Then one device call: {"command": "tar xJf .carry/kda42x/kda42.tar.xz -C .carry && bash
# .carry/kda42/run.sh", "carry": [".carry/kda42x"], "timeout_s": 420}.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
P=bench/results/raw-2026-11-30-s15/prepared_kda42
F=kernels/cuda/kda_chunked_backward.cu
tmp=$(mktemp -d)
for v in h1:h1_solve_held_half h3:h3_solve_held_quarter; do
  git show "HEAD:$F" > "$tmp/${v%%:*}.cu"
  patch -s "$tmp/${v%%:*}.cu" < "$P/${v#*:}.diff"
done
# The device-side script travels in the same archive.
EXTRA="$P/run.sh" bash tools/gpu/build_ab_carry.sh kda42 kda "$F" base=git:HEAD h1="$tmp/h1.cu" \
  h3="$tmp/h3.cu"
