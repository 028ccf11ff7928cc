#!/usr/bin/env bash
# kda67 (twenty-first session): base = c184cdd (kernels of fe11770); gref = the grad kernel's
# cumulative log-gates as FP32 references at the 16-token sub-chunk starts plus offsets (decays
# from differences as accurate as their own size; dbeta's kh Gam dKb term handed over in bufw).
# Paired dA_log draws (same seeds on both builds) at the tail shapes, the hash gate (new bits
# expected), 3 alternating chunked-only bench rounds, the suite + sanitizers on gref, ncu
# per-kernel times. (The paired draws as written then are ab_extras.sh's ab_tails_start /
# ab_tails_summary since, the bench step ab_kda_gate: the same commands and files.)
# Build here: EXTRA=bench/results/raw-2026-11-30-s21/kda67/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda67 kda kernels/cuda/kda_chunked_backward.cu base=git:c184cdd gref=tree
# Device call: {"command": "tar xJf .carry/kda67x/kda67.tar.xz -C .carry && bash .carry/kda67/run.sh",
#   "carry": [".carry/kda67x"], "timeout_s": 480}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda67
ab_tails_pairs $D "base gref" "B2_T63_H4:150:3:23100000 B2_T65_H4:150:2:23200000 B2_T65_H2:200:3:23300000 B2_T65_H1:200:2:23400000 B1_T200_H2_noinit:100:1:23500000"
echo "== tails at $(ab_el) s"; ab_pack
ab_kda_gate $D "base gref" 3
ab_pack
ab_ncu_kernels $D "base gref" "0 2"
ab_pack; echo "== done at $(ab_el) s"
