#!/bin/bash
# mhc18: builds the candidates of the device A/B from git on the 2-core machine (ninja -j1), each a
# Release -DCAKEGRAD_KERNELS_ONLY=ON build of cakegrad_mhc_bench and cakegrad_gpu_mhc_tests plus
# mhc12's fhash (raw-2026-11-30-mhc12/fhash.cu.txt) linked against that build's mHC libraries,
# stripped (--strip-debug) into DEST/<variant>/. base is copied from .carry/mhc16/cand (mhc-s16
# 109ec47, whose mhc_forward.cu differs from main d920723 by one comment line).
#   VARIANTS="c1:0df665f c2:6a94272 c12:6c725d9" bash build.sh
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
here=$repo/bench/results/raw-2026-11-30-mhc18/scripts
dest=${DEST:-/work/main/.carry/mhc18}
work=${WORK:-/tmp/mhc18-build}
nvcc=/usr/local/cuda/bin/nvcc
mkdir -p "$work" "$dest"
if [ ! -d "$dest/base" ]; then cp -r /work/main/.carry/mhc16/cand "$dest/base"; fi
for vr in ${VARIANTS}; do
  v=${vr%%:*} ref=${vr#*:}
  src=$work/src-$v bld=$work/build-$v
  rm -rf "$src" "$bld"
  mkdir -p "$src"
  git -C "$repo" archive "$ref" | tar x -C "$src"
  cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAKEGRAD_KERNELS_ONLY=ON \
    > "$work/cmake_$v.log" 2>&1
  ninja -j1 -C "$bld" cakegrad_mhc_bench cakegrad_gpu_mhc_tests > "$work/ninja_$v.log" 2>&1 ||
    { tail -30 "$work/ninja_$v.log"; exit 1; }
  cp "$repo/bench/results/raw-2026-11-30-mhc12/fhash.cu.txt" "$work/fhash.cu"
  "$nvcc" -O3 -std=c++17 --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] \
    -I"$src/kernels/include" "$work/fhash.cu" "$bld/kernels/libcakegrad_cuda_mhc.a" \
    "$bld/kernels/libcakegrad_reference_mhc.a" -o "$work/fhash_$v" -lcuda -lcudart_static -ldl \
    -lrt -lpthread
  rm -rf "${dest:?}/$v"
  mkdir -p "$dest/$v"
  strip --strip-debug -o "$dest/$v/fhash" "$work/fhash_$v"
  strip --strip-debug -o "$dest/$v/cakegrad_mhc_bench" "$bld/bench/cakegrad_mhc_bench"
  strip --strip-debug -o "$dest/$v/cakegrad_gpu_mhc_tests" "$bld/tests/cakegrad_gpu_mhc_tests"
  echo "$v = $(git -C "$repo" rev-parse --short "$ref") built $(date -u +%FT%TZ)" >> "$dest/BUILT.txt"
done
cp "$here/run.sh" "$dest/" 2>/dev/null || true
cp "$repo/bench/results/raw-2026-11-30-mhc16/scripts/expected_fhash.txt" "$dest/"
(cd "$dest" && md5sum */cakegrad_mhc_bench */cakegrad_gpu_mhc_tests */fhash) >> "$dest/BUILT.txt"
du -sh "$dest"
