#!/usr/bin/env bash
# Compares the chunk records of the chunked KDA forward's preparation kernel between two versions
# of kernels/cuda/kda_chunked_forward.cu, byte for byte, on the host (tools/emu): a restructured
# kernel that keeps every record value must leave the workspace bitwise identical (then the
# forward's and the chunked backward's outputs are unchanged too).
# Usage (repo root): bash tools/emu/run_kda_prep_records_compare.sh [BASE_REV] (default: main)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
base=${1:-main}
out=${OUT:-/tmp/kda_prep_emu}
mkdir -p "$out/base" "$out/new"
git show "$base:kernels/cuda/kda_chunked_forward.cu" > "$out/base/kda_chunked_forward.cu"
cp kernels/cuda/kda_chunked_forward.cu "$out/new/kda_chunked_forward.cu"
for which in base new; do
  python3 tools/emu/emu_transform.py forward "$out/$which/kda_chunked_forward.cu" \
    > "$out/$which/fwd_emu.inc"
  g++ -std=c++20 -O2 -w -Ikernels/include -Ikernels -Ikernels/cuda -I/usr/local/cuda/include \
    -Itools/emu -I"$out/$which" tools/emu/kda_prep_records_emu.cc -o "$out/$which/prep_emu" \
    -lpthread
  "$out/$which/prep_emu" "$out/$which/records.bin"
done
if cmp "$out/base/records.bin" "$out/new/records.bin"; then
  echo "records bitwise identical ($(stat -c %s "$out/new/records.bin") bytes)"
else
  echo "records DIFFER"
  exit 1
fi
