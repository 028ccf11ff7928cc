#!/usr/bin/env bash
# One device call of the fifth KDA session (kda-s5). Phase A (correctness, run concurrently: none
# of it is timed): the whole KDA GPU suite; the dA_log repeats (B1_T200_H2_noinit x300;
# B2_T65_H1 x150 on this build and, if present, on $D/base_kda_tests, the main build, for the
# tail's distribution); the forward record hashes; memcheck then racecheck of the chunked
# backward. Phase B (alone on the GPU): the bench, per-kernel ncu times at (1, 32768, 16), then one
# detailed ncu profile of a KdaChunkGradKernel launch if time is left. Binaries and this script in
# D (default .carry/kda-s5, carried); logs in $OUT/logs.tgz (the tool returns at most 8 files;
# packed after each phase). BUDGET (default 183 s) bounds phase B's steps.
set -uo pipefail
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
OUT=$(mktemp -d)
pack() { tar czf "$FINAL/logs.tgz" -C "$OUT" .; }
D=${D:-.carry/kda-s5}
T=$D/cakegrad_gpu_kda_tests
B=$D/cakegrad_kda_bench
export PATH=$PATH:/usr/local/cuda/bin
START=$(date +%s)
left() { echo $((${BUDGET:-183} - ($(date +%s) - START))); }
summ() { grep -E "^\[  FAILED  \]|^\[  PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY|error:" "$1" | sort | uniq -c | head -12; }
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
  echo "== $name rc=$? $(($(date +%s) - t0)) s"
  summ "$OUT/$name.log"
}
{
  date -u +%FT%TZ
  cat "$D/SOURCE"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
} | tee "$OUT/env.txt"
CHK=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
worst() { echo "$1: dA_log worst of $(grep -c 'dA_log' "$2") draws: $(grep -h 'dA_log' "$2" |
  awk '{print $(NF-2)}' | sort -g | tail -3 | tr '\n' ' ') over 1e-4: $(grep -h 'dA_log' "$2" |
  awk '$(NF-2) > 1e-4' | wc -l)"; }
# Phase A.
(timeout 90 "$T" >"$OUT/all.log" 2>&1; echo "all rc=$?" >"$OUT/all.rc") &
(
  timeout 40 "$T" --gtest_repeat=300 --gtest_filter="$CHK/B1_T200_H2_noinit" >"$OUT/dalog_repeat.log" 2>&1
  echo "dalog_repeat rc=$?"
  timeout 25 "$T" --gtest_repeat=150 --gtest_filter="$CHK/B2_T65_H1" >"$OUT/t65_repeat.log" 2>&1
  echo "t65_repeat rc=$?"
  if [ -x "$D/base_kda_tests" ]; then
    timeout 25 "$D/base_kda_tests" --gtest_repeat=150 --gtest_filter="$CHK/B2_T65_H1" \
      >"$OUT/t65_repeat_base.log" 2>&1
    echo "t65_repeat_base rc=$?"
  fi
  timeout 20 "$T" --gtest_filter='KdaKernels.ForwardRecordHashesForCrossBuildComparison' \
    >"$OUT/hashes.log" 2>&1
  echo "hashes rc=$?"
) >"$OUT/phaseA2.rc" 2>&1 &
(
  timeout 20 compute-sanitizer --tool memcheck --error-exitcode 9 "$T" \
    --gtest_filter='KdaKernels.SanitizeChunkedBackward*' >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$T" \
    --gtest_filter='KdaKernels.SanitizeChunkedBackward*' >"$OUT/racecheck.log" 2>&1
  echo "racecheck rc=$?"
) >"$OUT/phaseA3.rc" 2>&1 &
wait
echo "== phase A done at $(($(date +%s) - START)) s"
cat "$OUT/all.rc" "$OUT/phaseA2.rc" "$OUT/phaseA3.rc"
for f in all dalog_repeat t65_repeat t65_repeat_base hashes memcheck racecheck; do
  [ -f "$OUT/$f.log" ] && { echo "-- $f"; summ "$OUT/$f.log"; }
done
grep -hE "kda chunked bwd.*(dA_log|ddt_bias|dinitial)" "$OUT/all.log" | sort -k8 -g | tail -3
worst "B1_T200_H2_noinit" "$OUT/dalog_repeat.log"
worst "B2_T65_H1 (this build)" "$OUT/t65_repeat.log"
[ -f "$OUT/t65_repeat_base.log" ] && worst "B2_T65_H1 (main build)" "$OUT/t65_repeat_base.log"
grep -h "kda hashes" "$OUT/hashes.log"
pack
# Phase B.
step bench 60 "$B"
grep -E "median" "$OUT/bench.log" | grep -v fwd
KDA_BENCH_CASES=1 step ncu 30 ncu --clock-control none --metrics gpu__time_duration.sum \
  -k regex:KdaChunk -c 40 --csv --log-file "$OUT/ncu.csv" "$B"
python3 - "$OUT/ncu.csv" <<'PY' | tee "$OUT/ncu_summary.log"
import csv, collections, statistics, sys
t = collections.defaultdict(list)
for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')):
    t[r["Kernel Name"].split("(")[0]].append(float(r["Metric Value"].replace(",", "")))
for k, v in t.items():
    print(f"{k:70s} n={len(v):4d} median {statistics.median(v)/1e3:9.1f} us")
PY
step ncu_grad 30 ncu --clock-control none --section WarpStateStats --section SourceCounters \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --print-details all \
  -k regex:KdaChunkGrad -c 1 "$T" --gtest_filter="$CHK/B1_T4096_H4"
echo "done in $(($(date +%s) - START)) s"
pack
