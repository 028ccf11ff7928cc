#!/usr/bin/env bash
# Builds kda47's A/B carry here (repo root): main's grad kernel against uv1 and uv1b (patches).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
P=bench/results/raw-2026-11-30-s17/kda47
F=kernels/cuda/kda_chunked_backward.cu
tmp=$(mktemp -d)
for v in uv1 uv1b; do
  git show "HEAD:$F" > "$tmp/$v.cu"
  patch -s "$tmp/$v.cu" < "$P/$v.diff"
done
EXTRA="$P/run.sh" bash tools/gpu/build_ab_carry.sh kda47 kda "$F" base=git:HEAD uv1="$tmp/uv1.cu" \
  uv1b="$tmp/uv1b.cu"
