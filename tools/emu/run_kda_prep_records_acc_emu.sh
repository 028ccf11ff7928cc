#!/usr/bin/env bash
# Accuracy of the chunked KDA preparation's records against FP64 on the host
# (tools/emu/kda_prep_records_acc_emu.cc), for the working tree and optionally a base revision
# (its kernels/cuda/kda_*.cuh headers and kda_chunked_forward.cu).
# Usage (repo root): bash tools/emu/run_kda_prep_records_acc_emu.sh [BASE_REV]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source tools/emu/kda_emu_sources.sh
for_base_and_new "${OUT:-/tmp/kda_rec_acc_emu}" "${1:-}" tools/emu/kda_prep_records_acc_emu.cc \
  rec_acc_emu
