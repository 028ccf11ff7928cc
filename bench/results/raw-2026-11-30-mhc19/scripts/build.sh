#!/bin/bash
# mhc19: stages one variant of the device A/B into DEST/<name>/ (stripped kernels-only bench and
# test binaries plus fhash19, the fingerprint tool: fhash19.cu.txt linked against that build's
# mHC libraries). BUILD: a Release -DCAKEGRAD_KERNELS_ONLY=ON build dir in which
# `ninja -j1 cakegrad_mhc_bench cakegrad_gpu_mhc_tests` was run for the variant's commit.
#   BUILD=build-mhc19 NAME=cand bash build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
dest=${DEST:-/work/main/.carry/mhc19}
bld=$(cd "$repo" && cd "$BUILD" && pwd)
nvcc=/usr/local/cuda/bin/nvcc
mkdir -p "$dest/$NAME" /tmp/mhc19-fh
cp "$here/fhash19.cu.txt" /tmp/mhc19-fh/fhash19.cu
"$nvcc" -O3 -std=c++17 --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] \
  -I"$repo/kernels/include" /tmp/mhc19-fh/fhash19.cu "$bld/kernels/libcakegrad_cuda_mhc.a" \
  "$bld/kernels/libcakegrad_reference_mhc.a" -o /tmp/mhc19-fh/fhash_$NAME -lcuda -lcudart_static \
  -ldl -lrt -lpthread
strip --strip-debug -o "$dest/$NAME/fhash" /tmp/mhc19-fh/fhash_$NAME
strip --strip-debug -o "$dest/$NAME/cakegrad_mhc_bench" "$bld/bench/cakegrad_mhc_bench"
strip --strip-debug -o "$dest/$NAME/cakegrad_gpu_mhc_tests" "$bld/tests/cakegrad_gpu_mhc_tests"
echo "$NAME = $(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet HEAD -- kernels || echo '+dirty') built $(date -u +%FT%TZ)" >> "$dest/BUILT.txt"
(cd "$dest" && md5sum "$NAME"/*) >> "$dest/BUILT.txt"
