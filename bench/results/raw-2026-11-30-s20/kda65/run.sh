#!/usr/bin/env bash
# kda65 (twentieth session): base = 275c9e2 (kernels of 76660c3: the checkpoint pass with BF16x6 in
# 8 chain warps of two tiles at 64 rows); c16 = the next commit (all 16 warps on the chain, one tile
# each, at 64 rows). 60 paired dA_log draws at (2, 65, 1), the hash gate (new bits: kept),
# 3 alternating chunked-only bench rounds, the suite + sanitizers on c16, ncu per-kernel times.
# Build here: EXTRA=bench/results/raw-2026-11-30-s20/kda65/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda65 kda kernels/cuda/kda_chunked_forward.cu base=git:275c9e2 c16=git:HEAD
# Device call: {"command": "tar xJf .carry/kda65x/kda65.tar.xz -C .carry && bash .carry/kda65/run.sh",
#   "carry": [".carry/kda65x"], "timeout_s": 420}
# (Its bench and ncu steps as written then are ab_extras.sh's ab_kda_gate / ab_ncu_kernels since:
# the same commands.)
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda65
ab_paired_tails $D "base c16" "B2_T65_H1" 60 22300000
echo "== tails at $(ab_el) s"; ab_pack
ab_kda_gate $D "base c16" 3
ab_pack
AB_NCU_UNTIL=330 ab_ncu_kernels $D "base c16"
ab_pack; echo "== done at $(ab_el) s"
