#!/usr/bin/env bash
# Accuracy of the chunked KDA preparation's records against FP64 on the host
# (tools/emu/kda_prep_records_acc_emu.cc), for the working tree and optionally a base revision
# (its kernels/cuda/kda_*.cuh headers and kda_chunked_forward.cu).
# Usage (repo root): bash tools/emu/run_kda_prep_records_acc_emu.sh [BASE_REV]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=${OUT:-/tmp/kda_rec_acc_emu}
run() {  # run TAG: sources under $out/TAG/src
  local tag=$1 src=$out/$1/src
  python3 tools/emu/emu_transform.py forward "$src/kda_chunked_forward.cu" > "$out/$tag/fwd_emu.inc"
  awk '/^constexpr int C = 64;/{f=1} /^\/\/ The per-chunk pass \(KdaChunkGradKernel\)/{f=0} f' \
    tests/kernels/kda_chunked_backward_math_test.cc > "$out/$tag/prep.inc"
  g++ -std=c++20 -O2 -w -I"$src" -Ikernels/include -Ikernels -Ikernels/cuda \
    -I/usr/local/cuda/include -Itools/emu -I"$out/$tag" tools/emu/kda_prep_records_acc_emu.cc \
    -o "$out/$tag/rec_acc_emu" -lpthread
  echo "== $tag"
  "$out/$tag/rec_acc_emu"
}
for tag in ${1:+base} new; do
  mkdir -p "$out/$tag/src"
  for f in kda_chunked_forward.cu kda_chunked_forward.cuh kda_common.cuh kda_mma.cuh; do
    if [ "$tag" = base ]; then git show "$1:kernels/cuda/$f" > "$out/$tag/src/$f"
    else cp "kernels/cuda/$f" "$out/$tag/src/$f"; fi
  done
  run "$tag"
done
