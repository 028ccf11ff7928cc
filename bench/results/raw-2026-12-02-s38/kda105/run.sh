#!/usr/bin/env bash
# As run on the GPU machine (thirty-eighth session, call 3): a device-side study of the fast-decay
# dA_log tail. The test binary of branch kda-dump-study (carry built by
#   bash tools/gpu/build_ab_carry.sh kda105 kda "kernels/cuda/kda_chunked_backward.cu tests/gpu/kda_kernels_test.cu" study=tree
# on that branch) writes the grad kernel's nine gate-gradient parts of the last head
# (KDA_STUDY_DUMP) for the two draws that missed 1e-4 last session; tools/emu's driver writes the
# emulator's for the same inputs, and compare.py sets them side by side.
set -u
tar xJf .carry/kda105x/kda105.tar.xz -C .carry
B=.carry/kda105/study/cakegrad_gpu_kda_tests
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/B2_T1000_H4_fastdecay
for s in 100014 100092; do
  KDA_TEST_SEED=$s KDA_STUDY_DUMP=$OUT/gpu_dump_$s.bin $B --gtest_filter=$F > "$OUT/study_$s.log" 2>&1
  echo "seed $s rc=$?"; grep -E "dA_log" "$OUT/study_$s.log"
done
ls -la "$OUT"
