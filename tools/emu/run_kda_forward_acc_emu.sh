#!/usr/bin/env bash
# Accuracy of the chunked KDA forward (preparation + state pass) on the host against the FP64
# reference (tools/emu/kda_chunked_forward_acc_emu.cc), for the working tree and optionally a
# base revision (its kernels/cuda/kda_*.cuh headers and kda_chunked_forward.cu), so that a
# value-changing candidate's accuracy can be set beside the base's without a GPU.
# Usage (repo root): bash tools/emu/run_kda_forward_acc_emu.sh [BASE_REV]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=${OUT:-/tmp/kda_fwd_acc_emu}
run() {  # run TAG: sources under $out/TAG/src
  local tag=$1 src=$out/$1/src
  python3 tools/emu/emu_transform.py forward "$src/kda_chunked_forward.cu" > "$out/$tag/fwd_emu.inc"
  # The tag's own kda_*.cuh first, then the tree's other headers.
  g++ -std=c++20 -O2 -w -I"$src" -Ikernels/include -Ikernels -Ikernels/cuda \
    -I/usr/local/cuda/include -Itools/emu -I"$out/$tag" tools/emu/kda_chunked_forward_acc_emu.cc \
    kernels/reference/kda_reference.cc -o "$out/$tag/fwd_acc_emu" -lpthread
  echo "== $tag"
  "$out/$tag/fwd_acc_emu"
}
rc=0
for tag in ${1:+base} new; do
  mkdir -p "$out/$tag/src"
  for f in kda_chunked_forward.cu kda_chunked_forward.cuh kda_common.cuh kda_mma.cuh; do
    if [ "$tag" = base ]; then git show "$1:kernels/cuda/$f" > "$out/$tag/src/$f"
    else cp "kernels/cuda/$f" "$out/$tag/src/$f"; fi
  done
  run "$tag" || rc=1
done
exit $rc
