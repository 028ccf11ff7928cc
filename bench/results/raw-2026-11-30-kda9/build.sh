#!/usr/bin/env bash
# kda9: builds the carried binaries of the next session's A/B (run.sh) on the host: "base" =
# main's KDA (89914c3, or BASE_REV) and "cand" = this branch (kda-s9), kernels-only Release,
# cakegrad_gpu_kda_tests + cakegrad_kda_bench, stripped, into /work/main/.carry/kda9/{base,cand}/
# (ab_bench.sh's layout), plus copybw (device-to-device copy rate). ninja -j1 (2 shared cores).
# Usage: bash bench/results/raw-2026-11-30-kda9/build.sh   (from the kda-s9 worktree)
set -euo pipefail
cand=$(git rev-parse --show-toplevel)
base_rev=${BASE_REV:-89914c3}
base=${BASE_TREE:-/work/wt-kda9-base}
carry=/work/main/.carry/kda9
[ -d "$base" ] || git -C /work/main worktree add --detach "$base" "$base_rev"
build() {  # build SRC_TREE BUILD_DIR DEST
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAKEGRAD_KERNELS_ONLY=ON > /dev/null
  ninja -j1 -C "$2" cakegrad_gpu_kda_tests cakegrad_kda_bench
  mkdir -p "$3"
  cp "$2/tests/cakegrad_gpu_kda_tests" "$2/bench/cakegrad_kda_bench" "$3/"
  strip --strip-debug "$3/cakegrad_gpu_kda_tests" "$3/cakegrad_kda_bench"
}
build "$base" "$base/build-kda9base" "$carry/base"
build "$cand" "$cand/build-kda9" "$carry/cand"
here=$cand/bench/results/raw-2026-11-30-kda9
cp "$here/copybw.cu.txt" /tmp/kda9_copybw.cu
/usr/local/cuda/bin/nvcc -O2 -arch=sm_90a /tmp/kda9_copybw.cu -o "$carry/copybw"
cp "$here/run.sh" "$carry/run.sh"
git -C "$cand" rev-parse HEAD > "$carry/SOURCE"
git -C "$base" rev-parse HEAD >> "$carry/SOURCE"
du -sh "$carry"
