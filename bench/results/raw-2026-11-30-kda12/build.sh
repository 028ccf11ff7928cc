#!/usr/bin/env bash
# kda12 (never run on the device): builds the carried binaries of the next session's device call
# into /work/main/.carry/kda12/ (git-ignored): base = main 8a4a066, cand1 = 948f81f + the
# 64-row sanitize test (4e5814b), cand2 = f356ded (kda-s12), cand3 = 94d8afa (kda-s12-c3); each
# the kernels-only KDA suite and bench, Release, sm_90a, stripped; plus copybw.
# Usage (from anywhere, ~3 min per variant at -j1): bash build.sh [BASE CAND1 CAND2 CAND3]
set -euo pipefail
repo=/work/main
dst=$repo/.carry/kda12
base=${1:-8a4a066} cand1=${2:-4e5814b} cand2=${3:-f356ded} cand3=${4:-94d8afa}
mkdir -p "$dst"
build() {  # build VARIANT REV
  local v=$1 rev=$2 wt=/tmp/kda12-build-$1
  [ -d "$wt" ] || git -C "$repo" worktree add --detach "$wt" "$rev"
  git -C "$wt" checkout -q --detach "$rev"
  cmake -S "$wt" -B "$wt/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAKEGRAD_KERNELS_ONLY=ON \
    > /dev/null
  ninja -j1 -C "$wt/build" cakegrad_gpu_kda_tests cakegrad_kda_bench
  mkdir -p "$dst/$v"
  cp "$wt/build/tests/cakegrad_gpu_kda_tests" "$wt/build/bench/cakegrad_kda_bench" "$dst/$v/"
  strip --strip-debug "$dst/$v/"*
  echo "$v $(git -C "$wt" rev-parse HEAD)" >> "$dst/SOURCE"
}
: > "$dst/SOURCE"
build base "$base"
build cand1 "$cand1"
build cand2 "$cand2"
build cand3 "$cand3"
here=$(cd "$(dirname "$0")" && pwd)
/usr/local/cuda/bin/nvcc -O3 -arch=sm_90a -x cu "$here/../raw-2026-11-30-kda9/copybw.cu.txt" \
  -o "$dst/copybw"
cp "$here/run.sh" "$dst/run.sh"
du -sh "$dst"
