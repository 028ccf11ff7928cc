#!/usr/bin/env bash
# The state pass's checkpoint instances at 16, 32 and 64 rows on the host
# (tools/emu/kda_state_checkpoint_emu.cc), for the working tree and optionally a base revision:
# a bitwise state-pass change prints the same hash lines for both.
# Usage (repo root): bash tools/emu/run_kda_state_checkpoint_emu.sh [BASE_REV]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source tools/emu/kda_emu_sources.sh
out=${OUT:-/tmp/kda_state_ck_emu}
rc=0
for tag in ${1:+base} new; do
  rev=""
  [ "$tag" = base ] && rev=$1
  stage_sources "$out" "$tag" "$rev"
  build_driver "$out" "$tag" tools/emu/kda_state_checkpoint_emu.cc state_ck_emu \
    kernels/reference/kda_reference.cc
  echo "== $tag"
  "$out/$tag/state_ck_emu" || rc=1
done
exit $rc
