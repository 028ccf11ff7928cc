#!/usr/bin/env bash
# kda64 (twentieth session): base = 76660c3 (kda62 merged: checkpoint pass with BF16x6 in the
# chain warps); ow = the next commit (its three small terms on the idle o warps at 16 and 64 rows).
# 60 paired dA_log draws at (2, 65, 1), the hash gate (new bits: kept), 3 alternating chunked-only
# bench rounds, the suite + sanitizers on ow, ncu per-kernel times of one backward per bench case.
# Build here: EXTRA=bench/results/raw-2026-11-30-s20/kda64/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda64 kda kernels/cuda/kda_chunked_forward.cu base=git:76660c3 ow=git:HEAD
# Device call: {"command": "tar xJf .carry/kda64x/kda64.tar.xz -C .carry && bash .carry/kda64/run.sh",
#   "carry": [".carry/kda64x"], "timeout_s": 420}
# (Its bench and ncu steps as written then are ab_extras.sh's ab_kda_gate / ab_ncu_kernels since:
# the same commands.)
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda64
ab_paired_tails $D "base ow" "B2_T65_H1" 60 22200000
echo "== tails at $(ab_el) s"; ab_pack
ab_kda_gate $D "base ow" 3
ab_pack
AB_NCU_UNTIL=330 ab_ncu_kernels $D "base ow"
ab_pack; echo "== done at $(ab_el) s"
