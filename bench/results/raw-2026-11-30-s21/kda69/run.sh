#!/usr/bin/env bash
# kda69 (twenty-first session): base = a43f9cd (the checkpoint preparation's gate sums as an FP64
# scan, 8903c7b); ff = the same scan carried in two floats (SumFF: no FP64 conversions). The hash
# gate (same bits expected, or last-bit changes of a few G), 3 alternating chunked-only bench
# rounds, the suite + sanitizers on ff, ncu per-kernel times. (The bench step as written then is
# ab_extras.sh's ab_kda_gate since: the same commands.)
# Build here: EXTRA=bench/results/raw-2026-11-30-s21/kda69/run.sh bash tools/gpu/build_ab_carry.sh \
#   kda69 kda kernels/cuda/kda_chunked_forward.cu base=git:a43f9cd ff=tree
# Device call: {"command": "tar xJf .carry/kda69x/kda69.tar.xz -C .carry && bash .carry/kda69/run.sh",
#   "carry": [".carry/kda69x"], "timeout_s": 400}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda69
ab_kda_gate $D "base ff" 3
ab_pack
ab_ncu_kernels $D "base ff" "0 2"
ab_pack; echo "== done at $(ab_el) s"
