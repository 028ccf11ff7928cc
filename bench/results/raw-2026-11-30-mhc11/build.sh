#!/bin/bash
# mhc11: builds, on the build machine, what run.sh needs into /work/main/.carry/mhc11/: main's
# (before) and the branch's test binary, bench and hash tool, stripped.
# Usage: bash build.sh [BRANCH_WORKTREE] [MAIN_WORKTREE]   (ninja -j1)
set -euo pipefail
WT=${1:-/work/wt-mhc11}
MAIN=${2:-/work/wt-mhc11-main}
CARRY=/work/main/.carry/mhc11
HERE=$(cd "$(dirname "$0")" && pwd)
[ -d "$MAIN" ] || git -C /work/main worktree add --detach "$MAIN" main
mkdir -p "$CARRY"
build() {  # $1 tree, $2 build dir, $3 suffix, $4 extra nvcc flags for the hash tool
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAKEGRAD_KERNELS_ONLY=ON > /dev/null
  ninja -j1 -C "$2" cakegrad_gpu_mhc_tests cakegrad_mhc_bench
  cp "$2/tests/cakegrad_gpu_mhc_tests" "$CARRY/tests_$3"
  cp "$2/bench/cakegrad_mhc_bench" "$CARRY/bench_$3"
  cp "$HERE/hash_fused.cu.txt" "$2/hash_fused.cu"
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 $4 \
    --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] -I"$1/kernels/include" \
    -I"$1/kernels" "$2/hash_fused.cu" "$2/kernels/libcakegrad_cuda_mhc.a" \
    "$2/kernels/libcakegrad_reference_mhc.a" -o "$CARRY/hash_$3" -lcudart_static -ldl -lrt -lpthread
  strip --strip-debug "$CARRY/tests_$3" "$CARRY/bench_$3" "$CARRY/hash_$3"
}
[ "${SKIP_MAIN:-0}" = 1 ] || build "$MAIN" "$MAIN/build-mhc11m" main ""
build "$WT" "$WT/build-mhc11" fused "-DHAVE_FUSED"
cp "$HERE/run.sh" "$CARRY/run.sh"
{ echo "main $(git -C "$MAIN" rev-parse HEAD)"; echo "fused $(git -C "$WT" rev-parse HEAD) $(git -C "$WT" status --porcelain | wc -l) dirty"; } > "$CARRY/SOURCE"
du -sh "$CARRY"
