#!/usr/bin/env bash
# One device call of the fifth KDA session (kda-s5): the whole KDA GPU suite, the dA_log repeat,
# memcheck + racecheck of the chunked backward, the bench and per-kernel ncu times at
# (1, 32768, 16), then (if time is left) one detailed ncu profile of a KdaChunkGradKernel launch.
# Binaries and this script in D (default .carry/kda-s5, carried); logs in $OUT. Every step has its
# own timeout inside BUDGET (default 185 s); a step that no longer fits is reported SKIPPED.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=${D:-.carry/kda-s5}
T=$D/cakegrad_gpu_kda_tests
B=$D/cakegrad_kda_bench
export PATH=$PATH:/usr/local/cuda/bin
START=$(date +%s)
left() { echo $((${BUDGET:-185} - ($(date +%s) - START))); }
step() {  # step NAME TIMEOUT CMD...
  local name=$1 to=$2
  shift 2
  if [ "$(left)" -lt 8 ]; then
    echo "== $name: SKIPPED (time)"
    return
  fi
  [ "$to" -gt "$(left)" ] && to=$(left)
  echo "== $name (timeout $to s): $*"
  local t0=$(date +%s)
  timeout "$to" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc $(($(date +%s) - t0)) s"
  grep -E "^\[  FAILED  \]|^\[  PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY|error:" \
    "$OUT/$name.log" | head -20
}
{
  date -u +%FT%TZ
  cat "$D/SOURCE"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
} | tee "$OUT/env.txt"
CHK='Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/B1_T200_H2_noinit'
step all 80 "$T"
grep -hE "kda chunked bwd.*(dA_log|ddt_bias|dinitial)" "$OUT/all.log" | sort -k8 -g | tail -3
step dalog_repeat 35 "$T" --gtest_repeat=300 --gtest_filter="$CHK"
echo "dA_log worst of $(grep -c 'dA_log' "$OUT/dalog_repeat.log") draws:"
grep -h "dA_log" "$OUT/dalog_repeat.log" | awk '{print $(NF-2)}' | sort -g | tail -3
step memcheck 15 compute-sanitizer --tool memcheck --error-exitcode 9 "$T" \
  --gtest_filter='KdaKernels.SanitizeChunkedBackward*'
step racecheck 45 compute-sanitizer --tool racecheck --error-exitcode 9 "$T" \
  --gtest_filter='KdaKernels.SanitizeChunkedBackward*'
step bench 30 "$B"
grep -E "median" "$OUT/bench.log" | grep -v fwd
KDA_BENCH_CASES=1 step ncu 35 ncu --clock-control none --metrics gpu__time_duration.sum \
  -k regex:KdaChunk -c 40 --csv --log-file "$OUT/ncu.csv" "$B"
python3 - "$OUT/ncu.csv" <<'PY' | tee "$OUT/ncu_summary.txt"
import csv, collections, statistics, sys
t = collections.defaultdict(list)
for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')):
    t[r["Kernel Name"].split("(")[0]].append(float(r["Metric Value"].replace(",", "")))
for k, v in t.items():
    print(f"{k:70s} n={len(v):4d} median {statistics.median(v)/1e3:9.1f} us")
PY
step ncu_grad 40 ncu --clock-control none --section WarpStateStats --section SourceCounters \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --print-details all -k regex:KdaChunkGrad -c 1 "$T" \
  --gtest_filter='Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/B1_T4096_H4'
echo "done in $(($(date +%s) - START)) s"
