#!/usr/bin/env bash
# Builds a host driver of the chunked KDA backward's emulation (tools/emu): the kernels of
# KERNEL (default kernels/cuda/kda_chunked_backward.cu) and of FWD_KERNEL (default
# kernels/cuda/kda_chunked_forward.cu), up to their host
# launchers, made host-compilable (emu_transform.py), the FP64 chunk quantities of the host port
# (Prepare), the driver, the forward's launch 1 and the FP64 reference.
# Usage (repo root): bash tools/emu/build_kda_bwd_emu.sh DRIVER.cc OUT_DIR BINARY_NAME
set -euo pipefail
driver=$1 out=$2 name=$3
kern=${KERNEL:-kernels/cuda/kda_chunked_backward.cu}
fwd=${FWD_KERNEL:-kernels/cuda/kda_chunked_forward.cu}
mkdir -p "$out"
python3 tools/emu/emu_transform.py backward "$kern" > "$out/kern_emu.inc"
python3 tools/emu/emu_transform.py forward "$fwd" > "$out/fwd_emu.inc"
awk '/^constexpr int C = 64;/{f=1} /^\/\/ The per-chunk pass \(KdaChunkGradKernel\)/{f=0} f' \
  tests/kernels/kda_chunked_backward_math_test.cc > "$out/prep.inc"
g++ -std=c++20 -O2 -w -Ikernels/include -Ikernels -Ikernels/cuda -I/usr/local/cuda/include \
  -Itools/emu -I"$out" "$driver" tools/emu/kda_chunked_forward_emu.cc \
  kernels/reference/kda_reference.cc -o "$out/$name" -lpthread
