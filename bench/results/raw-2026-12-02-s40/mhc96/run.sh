#!/usr/bin/env bash
# Call mhc96 (fortieth session): the mHC hash test now prints a forward line too (forward_prepare's
# U and stats, forward_finish's Y; the backward line only covered backward_finish's outputs, so
# mhc95's "same bits" held for the backward and for stats through the suite's stats-equality
# test, but U was compared only against the FP64 reference). Both builds run the new test:
#   base: mhc_forward.cu of d7aae0c (before the U warps took the cluster sums)
#   main: mhc_forward.cu of the tree (9948713's kernel)
# Build: bash tools/gpu/build_ab_carry.sh mhc96 mhc kernels/cuda/mhc_forward.cu base=git:d7aae0c main=tree
#   (EXTRA=bench/results/raw-2026-12-02-s40/mhc96/run.sh)
# Device call: {"command": "bash bench/results/raw-2026-12-02-s40/mhc96/run.sh", "carry": [".carry/mhc96x"]}
# Read: "the other hashes equal base's" (the fwd lines among them). One round, no sanitizers.
source tools/gpu/ab_extras.sh
tar xJf .carry/mhc96x/mhc96.tar.xz -C .carry
for v in base main; do
  timeout 120 .carry/mhc96/$v/cakegrad_gpu_mhc_tests \
    --gtest_filter='MhcKernels.*HashesForCrossBuildComparison' 2>&1 | grep "hashes" > "$OUT/hashes_$v.txt"
  echo "$v: $(wc -l < "$OUT/hashes_$v.txt") hash lines"
done
grep "fwd" "$OUT/hashes_main.txt"
if diff "$OUT/hashes_base.txt" "$OUT/hashes_main.txt"; then echo "all hash lines equal"; else echo "hash lines DIFFER"; fi
