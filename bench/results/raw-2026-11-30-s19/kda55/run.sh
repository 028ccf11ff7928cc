#!/usr/bin/env bash
# kda55 (nineteenth session): base = main 549bc43; pf = the grad kernel's L2 prefetch of what
# launches 1 and 2 wrote (S0, dS1, U, dU, P, Tinv at the start; -W, Uv, V, g after dKdec; same
# bits expected); pfz = pf + z summed inside the d(Q Gam) / dW loop (its own DRAM walk gone; new
# bits for z). Hash lines of all three, paired dA_log tails base / pfz, 3 alternating bench
# rounds, the suite and sanitizers on pfz, ncu grad-kernel times.
# Device call: {"command": "tar xJf .carry/kda55x/kda55.tar.xz -C .carry && bash .carry/kda55/run.sh",
#   "carry": [".carry/kda55x"], "timeout_s": 420}
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda55
for v in base pf pfz; do
  timeout 60 $D/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' \
    2>&1 | grep hashes > "$AB_OUT/hashes_$v.txt"
  echo "$v: $(wc -l < "$AB_OUT/hashes_$v.txt") hash lines, $(cmp -s "$AB_OUT/hashes_base.txt" "$AB_OUT/hashes_$v.txt" && echo EQUAL || echo DIFFERENT) to base's"
done | tee "$AB_OUT/hash_summary.txt"
echo "== hashes at $(ab_el) s"
ab_paired_tails $D "base pfz" "B2_T65_H1 B2_T1000_H4_fastdecay" 60 19000000
echo "== tails at $(ab_el) s"; ab_pack
OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
  timeout 260 bash tools/gpu/ab_bench.sh $D kda "base pf pfz" 3 "pfz" > "$AB_OUT/ab_stdout.txt" 2>&1
echo "== ab rc=$? at $(ab_el) s"; cat "$AB_OUT/ab_stdout.txt"; ab_pack
AB_NCU_UNTIL=380 ab_ncu_time $D "base pf pfz"
ab_pack; echo "== done at $(ab_el) s"
