#!/usr/bin/env bash
# First device run of branch kda-bwd-mma (the per-chunk kernel of the chunked KDA backward on
# tensor cores; kda_h200.md, "Per-chunk kernel on tensor cores"). Binaries built on the
# development machine and carried in .carry/kda-mma (see that section for the packing commands).
# Usage (device tool, carry [".carry/kda-mma"]):
#   bash .carry/kda-mma/kda_bwd_mma_device.sh check   # correctness, ~6 min
#   bash .carry/kda-mma/kda_bwd_mma_device.sh perf    # bench and ncu, ~4 min
# Logs land in $OUT (the device tool's folder that comes back).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=.carry/kda-mma
T=$D/cakegrad_gpu_kda_tests
B=$D/cakegrad_kda_bench
START=$(date +%s)
left() { echo $((${BUDGET:-570} - ($(date +%s) - START))); }
step() { # step NAME TIMEOUT CMD...: runs CMD under timeout if enough time is left, log in $OUT
  local name=$1 to=$2
  shift 2
  if [ "$(left)" -lt 15 ]; then
    echo "== $name: SKIPPED (time)"
    return
  fi
  [ "$to" -gt "$(left)" ] && to=$(left)
  echo "== $name (timeout $to s): $*"
  local t0=$(date +%s)
  timeout "$to" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc $(($(date +%s) - t0)) s"
  grep -E "^\[  FAILED  \]|^\[  PASSED  \]|Failure|ERROR SUMMARY|RACECHECK SUMMARY|error:" \
    "$OUT/$name.log" | head -40
}
{
  date -u +%FT%TZ
  cat $D/SOURCE
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
} | tee "$OUT/env.txt"
case "${1:-check}" in
  check)
    # The whole suite: the 18 KdaChunkedBackwardAccuracy cases call the chunked backward
    # directly (KdaBackwardCuda routes by KdaBwdParams::algorithm, sequential by default, since
    # main's c9e43c6 removed the CAKEGRAD_KDA_CHUNKED_BWD environment variable).
    step all 150 $T
    grep -E "kda chunked bwd.*(dA_log|ddt_bias|dinitial)" "$OUT/all.log" | sort -k8 -g | tail -8
    # The dA_log tail (1 draw in 150 over 1e-4 at B1_T200_H2_noinit on main's chunked kernels).
    step dalog_repeat 120 $T --gtest_repeat=150 \
      --gtest_filter='Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/B1_T200_H2_noinit:Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/B2_T63_H4'
    grep -h "dA_log" "$OUT/dalog_repeat.log" | sort -k7 -g | tail -5
    step memcheck 40 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
      --gtest_filter='KdaKernels.SanitizeChunkedBackward*'
    step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
      --gtest_filter='KdaKernels.SanitizeChunkedBackward*'
    ;;
  perf)
    step bench 80 $B
    grep -E "bwd chunked" "$OUT/bench.log"
    step ncu 90 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:KdaChunk \
      --csv --log-file "$OUT/ncu.csv" $B
    # One per-chunk launch from a short test process: where its cycles go now.
    step ncu_grad 120 ncu --clock-control none --section WarpStateStats --section SourceCounters \
      --section SpeedOfLight --section ComputeWorkloadAnalysis -k regex:KdaChunkGrad -c 1 $T \
      --gtest_filter='Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/B1_T4096_H4'
    ;;
esac
