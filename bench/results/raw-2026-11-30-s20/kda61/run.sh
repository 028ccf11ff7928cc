#!/usr/bin/env bash
# kda61 (prepared in the nineteenth session, never run on a device): base = main; bal_dm = branch
# kda61-ready (224620d): dM's 20 tiles x 8 v-steps split 10 steps a warp as dA's (kda58), the split
# tiles' parts left in U's space past dA's buffer and summed by the block after the barrier (new
# bits in dM's split tiles; host emulator: every case within SPEC, accuracy as main's,
# emu_accuracy.txt). Hash lines, 60 paired dA_log draws at both tail shapes, 3 alternating
# chunked-only bench rounds, the suite and sanitizers on bal_dm, ncu grad-kernel times.
# Build here (the patch is against main 82d3f4b's kernels/cuda/kda_chunked_backward.cu; branch
# kda61-ready holds the same commit where the workspace kept it):
#   cp kernels/cuda/kda_chunked_backward.cu /tmp/bal_dm.cu
#   patch /tmp/bal_dm.cu bench/results/raw-2026-11-30-s19/kda61-ready/cand_bal_dm.diff
#   EXTRA=bench/results/raw-2026-11-30-s20/kda61/run.sh bash tools/gpu/build_ab_carry.sh \
#     kda61 kda kernels/cuda/kda_chunked_backward.cu base=git:main bal_dm=/tmp/bal_dm.cu
# Device call: {"command": "tar xJf .carry/kda61x/kda61.tar.xz -C .carry && bash .carry/kda61/run.sh",
#   "carry": [".carry/kda61x"], "timeout_s": 360}
# (Its bench and ncu steps as written then are ab_extras.sh's ab_kda_gate / ab_ncu_kernels since:
# the same commands.)
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda61
ab_paired_tails $D "base bal_dm" "B2_T65_H1 B2_T1000_H4_fastdecay" 60 19200000
echo "== tails at $(ab_el) s"; ab_pack
ab_kda_gate $D "base bal_dm" 3
ab_pack
AB_NCU_UNTIL=300 ab_ncu_time $D "base bal_dm"
ab_pack; echo "== done at $(ab_el) s"
