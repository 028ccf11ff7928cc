#!/usr/bin/env bash
# The state pass's checkpoint instances at 16, 32 and 64 rows on the host
# (tools/emu/kda_state_checkpoint_emu.cc), for the working tree and optionally a base revision:
# a bitwise state-pass change prints the same hash lines for both.
# Usage (repo root): bash tools/emu/run_kda_state_checkpoint_emu.sh [BASE_REV]
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source tools/emu/kda_emu_sources.sh
for_base_and_new "${OUT:-/tmp/kda_state_ck_emu}" "${1:-}" tools/emu/kda_state_checkpoint_emu.cc \
  state_ck_emu kernels/reference/kda_reference.cc
