#!/usr/bin/env bash
# Builds mhc23's carry here (repo root) from a tree with the split token kernel (the commit after
# this script's): base = mhc_backward.cu with cand.diff reversed, cand = the tree's.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
P=bench/results/raw-2026-11-30-s17/mhc23
F=kernels/cuda/mhc_backward.cu
tmp=$(mktemp -d)
cp "$F" "$tmp/base.cu"
patch -s -R "$tmp/base.cu" < "$P/cand.diff"
EXTRA="$P/run.sh" bash tools/gpu/build_ab_carry.sh mhc23 mhc "$F" base="$tmp/base.cu" cand="$F"
