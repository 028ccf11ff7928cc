#!/usr/bin/env bash
# Accuracy of the chunked KDA preparation's records against FP64 on the host
# (tools/emu/kda_prep_records_acc_emu.cc), for the working tree and optionally a base revision
# (its kernels/cuda/kda_*.cuh headers and kda_chunked_forward.cu).
# Usage (repo root): bash tools/emu/run_kda_prep_records_acc_emu.sh [BASE_REV]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source tools/emu/kda_emu_sources.sh
out=${OUT:-/tmp/kda_rec_acc_emu}
for tag in ${1:+base} new; do
  rev=""
  [ "$tag" = base ] && rev=$1
  stage_sources "$out" "$tag" "$rev"
  # The FP64 Prepare of the chunked backward's math test, the records' reference.
  awk '/^constexpr int C = 64;/{f=1} /^\/\/ The per-chunk pass \(KdaChunkGradKernel\)/{f=0} f' \
    tests/kernels/kda_chunked_backward_math_test.cc > "$out/$tag/prep.inc"
  build_driver "$out" "$tag" tools/emu/kda_prep_records_acc_emu.cc rec_acc_emu
  echo "== $tag"
  "$out/$tag/rec_acc_emu"
done
