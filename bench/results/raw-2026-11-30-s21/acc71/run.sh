#!/usr/bin/env bash
# acc71 (twenty-first session), a study, not a candidate: is the tensor cores' truncating FP32
# accumulation behind the chunked dA_log's device-only tail (acc70's worst two-head draws do not
# reproduce in the host emulator)? base = main's kernels (8022887); rn = every mma.sync of the
# KDA kernels into fresh zero accumulators, then added in FP32 round-to-nearest
# (rn_kda_mma.diff), so that no accumulation chains inside the tensor cores. Paired fresh draws
# at the tail shapes, then acc70's worst draws again.
# Build here: EXTRA=bench/results/raw-2026-11-30-s21/acc71/run.sh bash tools/gpu/build_ab_carry.sh \
#   acc71 kda kernels/cuda/kda_mma.cuh base=tree rn=/tmp/kda_mma_rn.cuh
# Device call: {"command": "tar xJf .carry/acc71x/acc71.tar.xz -C .carry && bash .carry/acc71/run.sh",
#   "carry": [".carry/acc71x"], "timeout_s": 240}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call acc71
ab_tails_pairs $D "base rn" "B2_T63_H2:150:4:28100000 B1_T200_H2_noinit:100:4:28500000 B2_T65_H1:100:4:28900000"
echo "== tails at $(ab_el) s"; ab_pack
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
for v in base rn; do
  for s in B2_T63_H2:271030179 B2_T63_H2:271000137 B2_T65_H2:272030078 B1_T200_H2_noinit:273010083; do
    echo "$v ${s%%:*} ${s#*:} $(KDA_TEST_SEED=${s#*:} timeout 60 $D/$v/cakegrad_gpu_kda_tests \
      --gtest_filter="$F/${s%%:*}" 2>&1 | ab_draws | cut -d' ' -f2)"
  done
done | tee "$AB_OUT/worst.txt"
ab_pack; echo "== done at $(ab_el) s"
