#!/usr/bin/env bash
# Runs ON the GPU machine: a session's final-build call. Unpacks .carry/gpu.tar.xz (made here by
# tools/gpu/package_for_gpu.sh), runs every family's suite, the daemon, Python (5 steps), the
# benches with mHC's PyTorch reference and the sanitizers (SANITIZE_TOOLS, default all four) of
# SANITIZE_FAMILIES (default all three: the twelve runs go at once and take about as long as KDA's
# racecheck alone, ~105 s), then ncu per-kernel times of the chunked KDA backward at the three
# bench cases. Logs go to $OUT (the device tool's folder), the ncu times to $OUT/prof.
# Device call: {"command": "bash tools/gpu/final_build_call.sh",
#   "carry": [".carry/gpu.tar.xz", "client/python/cakegrad/v1"], "timeout_s": 560}
# Since the sequential KDA backward runs in FP64 (twenty-fifth session) the suites, benches and
# KDA's sanitizers take ~420 s; the ncu cases (~10 s each) stop by 515 s.
# SKIP (default "6 7") picks the stages left out; SKIP=7 adds the daemon bench (~60-90 s).
# NCU_CASES (default "0 1 2") picks the KDA bench cases profiled; empty skips them (~30 s), e.g. to
# leave a call's time for another job after this one when KDA is unchanged.
# (the eighteenth and nineteenth sessions copied this into bench/results/raw-*/final/run.sh.)
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
tar xJf .carry/gpu.tar.xz
OUT=${OUT:-/tmp/out}
PYTHON_FIRST=1 STEPS=5 SKIP="${SKIP-6 7}" FAMILIES="conv1d mhc kda" TORCH_FAMILIES=mhc \
  SANITIZE_FAMILIES="${SANITIZE_FAMILIES:-conv1d mhc kda}" timeout 480 bash tools/gpu/run_all_gpu.sh
echo "== run_all rc=$? at $(el) s"
AB_OUT=$OUT/prof
source tools/gpu/ab_extras.sh  # ab_ncu_case
for c in ${NCU_CASES-0 1 2}; do
  [ "$(el)" -lt 515 ] || break
  echo "case $c:"
  ab_ncu_case .carry/gpu/bin/cakegrad_kda_bench "$c" "$AB_OUT/ncu_kernels_case$c.txt"
done
echo "== done at $(el) s"
