#!/usr/bin/env bash
# probe_s33 (thirty-third session): (1) the mutant check of the hold test: a grad kernel that waits
# for one count instead of all (b.ready_target = 1) should fail
# ChunkedBackwardKeepsItsBitsWhileAnotherKernelHoldsMostSms; (2) ncu of backward_finish's token
# and column kernels at T = 16384, C = 4096 (full sections: where the token kernel's time goes).
# Carry: .carry/gpu.tar.xz (main's packaged build) and .carry/kdamutx.
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
tar xJf .carry/gpu.tar.xz && tar xJf .carry/kdamutx/kdamut.tar.xz -C .carry
echo "== mutant (should FAIL)"
LD_LIBRARY_PATH=.carry/kdamut/lib timeout 240 .carry/kdamut/mut/cakegrad_gpu_kda_tests \
  --gtest_filter='*HoldsMostSms*' > "$OUT/mutant.txt" 2>&1
echo "mutant rc=$?"; grep -E "^\[  (FAILED|PASSED|     OK) |Failure|Expected|Which is" "$OUT/mutant.txt" | head -20
echo "== main (should pass)"
LD_LIBRARY_PATH=.carry/gpu/lib timeout 240 .carry/gpu/bin/cakegrad_gpu_kda_tests \
  --gtest_filter='*HoldsMostSms*' > "$OUT/main_hold.txt" 2>&1
echo "main rc=$?"; grep -E "^\[  (FAILED|PASSED|     OK) " "$OUT/main_hold.txt" | head
B=.carry/gpu/bin/cakegrad_mhc_bench
for k in MhcBwdTokenKernel MhcBwdColumnsTcKernel; do
  LD_LIBRARY_PATH=.carry/gpu/lib timeout 200 ncu --set full \
    --kernel-name-base demangled -k "regex:$k" -c 1 $B --profile > "$OUT/ncu_$k.txt" 2>&1
  echo "== ncu $k rc=$?"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issue Slots Busy|Achieved Occupancy|Registers Per|Executed Ipc A|Stall|Theoretical Occ" "$OUT/ncu_$k.txt" | head -30
done
