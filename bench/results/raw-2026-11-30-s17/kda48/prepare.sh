#!/usr/bin/env bash
# Builds kda48's carry here (repo root), from a tree with the forward's split launch and the
# side-by-side backward launch (the commit after this script's): base = the backward file as
# committed before it (conc_backward.diff reversed), conc = the tree's.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
P=bench/results/raw-2026-11-30-s17/kda48
F=kernels/cuda/kda_chunked_backward.cu
tmp=$(mktemp -d)
cp "$F" "$tmp/base.cu"
patch -s -R "$tmp/base.cu" < "$P/conc_backward.diff"
EXTRA="$P/run.sh" bash tools/gpu/build_ab_carry.sh kda48 kda "$F" base="$tmp/base.cu" conc="$F"
