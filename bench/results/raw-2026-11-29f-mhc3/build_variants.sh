#!/bin/bash
# How the call-1 variants were built (helper mhc3, 2026-11-29 ~21:11-21:14 UTC), from the tree
# later committed as mhc-s6c-ownwarp 3a24048 minus its own-warp code; with 3a24048 itself add
# -DMHC3_OWNWARP=0 (its default, 1, is the unmeasured own-warp stats path; that this reproduces
# the call-1 device code was not checked). mhc-s6c 84fc00c's device code is lean2f's, byte for
# byte (cuobjdump -sass with encodings compared).
# Every build has no (C, T) cutoff (MHC3_MAXT defaults to 2^40): C = 4096 always takes the cluster path.
cd /work/wt-mhc3
for spec in "r0:-DMHC3_SQ=0 -DMHC3_LEAN=0" "sq:-DMHC3_SQ=1 -DMHC3_LEAN=0" "lean:-DMHC3_SQ=1 -DMHC3_LEAN=1" \
    "lean2:-DMHC3_SQ=1 -DMHC3_LEAN=1 -DMHC3_STEP=2" "leanf:-DMHC3_SQ=1 -DMHC3_LEAN=1 -DMHC3_FASTCOEF=1" \
    "lean2f:-DMHC3_SQ=1 -DMHC3_LEAN=1 -DMHC3_STEP=2 -DMHC3_FASTCOEF=1"; do
  n=${spec%%:*}; f=${spec#*:}
  cmake -S . -B build-mhc3-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCAKEGRAD_KERNELS_ONLY=ON "-DCMAKE_CUDA_FLAGS=$f" > /dev/null || exit 1
  ninja -j1 -C build-mhc3-$n cakegrad_gpu_mhc_tests cakegrad_mhc_bench > /tmp/mhc3-build-$n.log 2>&1 || { echo "FAIL $n"; exit 1; }
  strip --strip-debug -o /work/main/.carry/mhc3/tests_$n build-mhc3-$n/tests/cakegrad_gpu_mhc_tests
  strip --strip-debug -o /work/main/.carry/mhc3/bench_$n build-mhc3-$n/bench/cakegrad_mhc_bench
done
