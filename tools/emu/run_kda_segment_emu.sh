#!/usr/bin/env bash
# The sequential KDA backward's passes before its backward kernel, emulated on the host
# (tools/emu/kda_segment_emu.cc): segment transitions, scans and recompute pass against the
# recurrence walked token by token in FP64. No GPU needed; a few minutes on the 2-core machine.
# Usage (repo root): [OUT=dir] bash tools/emu/run_kda_segment_emu.sh [g_mean]
#   g_mean 6: gates near lower_bound, so that the segments' state maps underflow to zero.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=${OUT:-/tmp/kda_segment_emu}
mkdir -p "$out"
python3 tools/emu/emu_transform.py rowpass kernels/cuda/kda_row_pass.cu > "$out/rowpass_emu.inc"
python3 tools/emu/emu_transform.py segment kernels/cuda/kda_segment.cu > "$out/segment_emu.inc"
g++ -std=c++20 -O2 -w -Ikernels/include -Ikernels -Ikernels/cuda -I/usr/local/cuda/include \
  -Itools/emu -I"$out" tools/emu/kda_segment_emu.cc -o "$out/kda_segment_emu" -lpthread
exec "$out/kda_segment_emu" "$@"
