#!/usr/bin/env bash
# Accuracy of the chunked KDA forward (preparation + state pass) on the host against the FP64
# reference (tools/emu/kda_chunked_forward_acc_emu.cc), for the working tree and optionally a
# base revision (its kernels/cuda/kda_*.cuh headers and kda_chunked_forward.cu), so that a
# value-changing candidate's accuracy can be set beside the base's without a GPU.
# Usage (repo root): bash tools/emu/run_kda_forward_acc_emu.sh [BASE_REV]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source tools/emu/kda_emu_sources.sh
for_base_and_new "${OUT:-/tmp/kda_fwd_acc_emu}" "${1:-}" tools/emu/kda_chunked_forward_acc_emu.cc \
  fwd_acc_emu kernels/reference/kda_reference.cc
