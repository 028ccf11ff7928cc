#!/bin/bash
# mhc16: builds the two variants of the device A/B from git, on the 2-core machine (ninja -j1):
#   base = BASE_REF (default: the merge-base of HEAD and main), cand = CAND_REF (default: HEAD),
# each a Release -DCAKEGRAD_KERNELS_ONLY=ON build of cakegrad_mhc_bench and cakegrad_gpu_mhc_tests
# plus mhc12's fhash (raw-2026-11-30-mhc12/fhash.cu.txt) linked against that build's mHC
# libraries, stripped (--strip-debug) into DEST/<variant>/, with run.sh, SOURCE.txt and the
# expected fingerprints beside them. Run from anywhere inside the worktree:
#   bash bench/results/raw-2026-11-30-mhc16/scripts/build.sh
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
here=$repo/bench/results/raw-2026-11-30-mhc16/scripts
base_ref=${BASE_REF:-$(git -C "$repo" merge-base HEAD main)}
cand_ref=${CAND_REF:-HEAD}
dest=${DEST:-/work/main/.carry/mhc16}
work=${WORK:-/tmp/mhc16-build}
nvcc=/usr/local/cuda/bin/nvcc
mkdir -p "$work" "$dest"
for v in base cand; do
  ref=$base_ref
  [ $v = cand ] && ref=$cand_ref
  src=$work/src-$v bld=$work/build-$v
  # Fresh trees: git archive stamps files with the commit time, which can predate old objects.
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
  echo "$v = $(git -C "$repo" rev-parse --short "$ref")" >> "$work/refs.txt"
done
cp "$here/run.sh" "$here/SOURCE.txt" "$here/expected_fhash.txt" "$dest/"
{ echo "built $(date -u +%FT%TZ) on $(hostname): $(sort -u "$work/refs.txt" | tr '\n' ' ')"
  for v in base cand; do
    (cd "$dest/$v" && md5sum cakegrad_mhc_bench cakegrad_gpu_mhc_tests fhash | sed "s@  @  $v/@")
  done; } > "$dest/BUILT.txt"
rm -f "$work/refs.txt"
cat "$dest/BUILT.txt"
du -sh "$dest"
