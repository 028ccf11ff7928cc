#!/usr/bin/env bash
# kda68 (twenty-first session): base = e966908 (kda67's gref merged: the grad kernel's log-gates
# as sub-chunk references plus offsets); kdlo = the checkpoint preparation's Kdec^T decays from
# its FP64 gate sums (the FP32 difference plus that of the sums' rounding errors, which the sums
# leave in the Kdec^T staging buffer); the forward's instances unchanged (same SASS).
# Paired dA_log draws (same seeds on both builds) at the tail shapes, the hash gate (new bits
# expected), 3 alternating chunked-only bench rounds, the suite + sanitizers on kdlo, ncu
# per-kernel times. (The paired draws as written then are ab_extras.sh's ab_tails_start /
# ab_tails_summary since, the bench step ab_kda_gate: the same commands and files.)
# Build here: EXTRA=bench/results/raw-2026-11-30-s21/kda68/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda68 kda kernels/cuda/kda_chunked_forward.cu base=git:e966908 kdlo=tree
# Device call: {"command": "tar xJf .carry/kda68x/kda68.tar.xz -C .carry && bash .carry/kda68/run.sh",
#   "carry": [".carry/kda68x"], "timeout_s": 480}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda68
ab_tails_pairs $D "base kdlo" "B2_T63_H4:150:4:24100000 B2_T65_H4:150:3:24500000 B2_T65_H2:200:3:24900000 B2_T65_H1:200:2:25300000 B1_T200_H2_noinit:100:1:25600000"
echo "== tails at $(ab_el) s"; ab_pack
ab_kda_gate $D "base kdlo" 3
ab_pack
ab_ncu_kernels $D "base kdlo" "0 2"
ab_pack; echo "== done at $(ab_el) s"
