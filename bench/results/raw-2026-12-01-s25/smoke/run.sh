#!/usr/bin/env bash
# Twenty-fifth session, first device call: the FP64 sequential KDA backward (uncommitted tree
# of the session, packed by tools/gpu/package_for_gpu.sh). KDA suite, a 1000-draw sweep of the
# (2, 65, 1) shape with the sequential backward, compute-sanitizer on the pinned draw, the bench.
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
tar xJf .carry/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib:${LD_LIBRARY_PATH:-}
B=.carry/gpu/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
timeout 200 $B/cakegrad_gpu_kda_tests > $OUT/kda_tests.txt 2>&1; echo "kda suite rc=$? at $(el) s"
tail -3 $OUT/kda_tests.txt
KDA_TEST_SEED_BASE=7000 timeout 150 $B/cakegrad_gpu_kda_tests \
  --gtest_filter='Shapes/KdaKernelsAccuracy.MatchesFp64Reference/B2_T65_H1' --gtest_repeat=1000 \
  --gtest_brief=1 > $OUT/sweep_b2_t65_h1.txt 2>&1; echo "sweep rc=$? at $(el) s"
grep "dA_log" $OUT/sweep_b2_t65_h1.txt | awk '{print $(NF-2)}' | sort -g | tail -3
grep -c "dA_log" $OUT/sweep_b2_t65_h1.txt
timeout 120 compute-sanitizer --tool memcheck $B/cakegrad_gpu_kda_tests \
  --gtest_filter='KdaKernelsAccuracyPinned.*' > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$? at $(el) s"
tail -2 $OUT/memcheck.txt
timeout 120 compute-sanitizer --tool racecheck $B/cakegrad_gpu_kda_tests \
  --gtest_filter='KdaKernelsAccuracyPinned.*' > $OUT/racecheck.txt 2>&1; echo "racecheck rc=$? at $(el) s"
tail -2 $OUT/racecheck.txt
timeout 150 $B/cakegrad_kda_bench > $OUT/bench_kda.txt 2>&1; echo "bench rc=$? at $(el) s"
cat $OUT/bench_kda.txt | tail -30
