#!/usr/bin/env bash
# dA_log over repeated fresh draws (tools/emu/kda_dalog_repeat_emu.cc): the chunked backward's
# kernels run on the host (as run_kda_chunked_backward_emu.sh) against the FP64 reference.
# Usage (repo root): KERNEL=path/to/kda_chunked_backward.cu OUT=dir \
#   bash tools/emu/run_kda_dalog_repeat_emu.sh T H seed0 count [kernels|fp64] [B] [init]
# The test's B2_T65_H1 (two 65-token documents, initial state): ... 65 1 seed0 count kernels 2 init
# (~10-17 s per draw on the 2-core development machine).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=${OUT:-/tmp/kda_dalog_emu}
kern=${KERNEL:-kernels/cuda/kda_chunked_backward.cu}
mkdir -p "$out"
if [ ! -x "$out/kda_dalog_repeat_emu" ] || [ -n "${REBUILD:-}" ]; then
  python3 tools/emu/emu_transform.py backward "$kern" > "$out/kern_emu.inc"
  python3 tools/emu/emu_transform.py forward kernels/cuda/kda_chunked_forward.cu > "$out/fwd_emu.inc"
  awk '/^constexpr int C = 64;/{f=1} /^\/\/ The per-chunk pass \(KdaChunkGradKernel\)/{f=0} f' \
    tests/kernels/kda_chunked_backward_math_test.cc > "$out/prep.inc"
  g++ -std=c++20 -O2 -w -Ikernels/include -Ikernels -Ikernels/cuda -I/usr/local/cuda/include \
    -Itools/emu -I"$out" tools/emu/kda_dalog_repeat_emu.cc tools/emu/kda_chunked_forward_emu.cc \
    kernels/reference/kda_reference.cc -o "$out/kda_dalog_repeat_emu" -lpthread
fi
exec "$out/kda_dalog_repeat_emu" "$@"
