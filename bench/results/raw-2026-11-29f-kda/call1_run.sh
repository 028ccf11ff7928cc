#!/usr/bin/env bash
# kda-s6 call 1: phase A (untimed, concurrent): whole suite (default rule), forward tests with the
# split forced everywhere, hashes (main, new x rules/rows), memcheck + racecheck Sanitize*.
# Phase B (alone): fwd-only bench A/B alternating, ncu per-kernel times, one full bench of new.
set -uo pipefail
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
OUT=$(mktemp -d)
pack() { tar czf "$FINAL/logs.tgz" -C "$OUT" .; }
D=.carry/kda
export PATH=$PATH:/usr/local/cuda/bin
START=$(date +%s)
el() { echo $(($(date +%s) - START)); }
summ() { grep -E "^\[  FAILED  \]|^\[  PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY|tests ran" "$1" | sort | uniq -c | head -12; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$OUT/env.txt"
FWDF='KdaKernels.*:Shapes/KdaForwardAccuracy.*:Shapes/KdaKernelsAccuracy.*'
(timeout 110 $D/new_tests >"$OUT/all.log" 2>&1; echo "all rc=$?" >"$OUT/all.rc") &
(CAKEGRAD_KDA_FWD_SPLIT=2 timeout 100 $D/new_tests --gtest_filter="$FWDF" >"$OUT/split2.log" 2>&1; echo "split2 rc=$?" >"$OUT/split2.rc") &
(
  H=KdaKernels.ForwardRecordHashesForCrossBuildComparison
  timeout 20 $D/main_tests --gtest_filter=$H 2>&1 | grep "kda hashes" | sed 's/^/main   /'
  for r in 0 1 2; do
    CAKEGRAD_KDA_FWD_SPLIT=$r timeout 20 $D/new_tests --gtest_filter=$H 2>&1 | grep "kda hashes" | sed "s/^/split$r /"
  done
  for rows in 16 32; do
    CAKEGRAD_KDA_STATE_ROWS=$rows timeout 20 $D/main_tests --gtest_filter=$H 2>&1 | grep "kda hashes" | sed "s/^/main(rows$rows?) /"
    CAKEGRAD_KDA_STATE_ROWS=$rows CAKEGRAD_KDA_FWD_SPLIT=2 timeout 20 $D/new_tests --gtest_filter=$H 2>&1 | grep "kda hashes" | sed "s/^/split2 rows$rows /"
    CAKEGRAD_KDA_STATE_ROWS=$rows CAKEGRAD_KDA_FWD_SPLIT=0 timeout 20 $D/new_tests --gtest_filter=$H 2>&1 | grep "kda hashes" | sed "s/^/split0 rows$rows /"
  done
) >"$OUT/hashes.log" 2>&1 &
(
  timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $D/new_tests --gtest_filter='KdaKernels.Sanitize*' >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"
  CAKEGRAD_KDA_FWD_SPLIT=2 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $D/new_tests --gtest_filter='KdaKernels.SanitizePacked*' >"$OUT/memcheck_split2.log" 2>&1
  echo "memcheck split2 rc=$?"
  timeout 80 compute-sanitizer --tool racecheck --error-exitcode 9 $D/new_tests --gtest_filter='KdaKernels.Sanitize*' >"$OUT/racecheck.log" 2>&1
  echo "racecheck rc=$?"
) >"$OUT/san.rc" 2>&1 &
wait
echo "== phase A done at $(el) s"
cat "$OUT"/*.rc
for f in all split2 memcheck memcheck_split2 racecheck; do echo "-- $f"; summ "$OUT/$f.log"; done
cat "$OUT/hashes.log"
pack
# Phase B.
fb() { KDA_BENCH_FWD_ONLY=1 timeout 30 "$@" 2>&1 | tee -a "$OUT/bench_fwd_raw.txt" | grep -E "fwd  median|copy:" | sed -E 's/.*fwd  median +([0-9.]+) ms.*/\1/; s/.*-> ([0-9.]+) GB.s.*/copy \1 GB\/s/' | tr '\n' ' '; echo; }
for rep in 1 2; do
  echo "rep $rep main:        $(fb $D/main_bench)"
  echo "rep $rep new rule1:   $(fb $D/new_bench)"
  echo "rep $rep new rule2:   $(CAKEGRAD_KDA_FWD_SPLIT=2 fb $D/new_bench)"
  echo "rep $rep newB2=0 r1:  $(fb $D/newb1_bench)"
  echo "rep $rep new rule0:   $(CAKEGRAD_KDA_FWD_SPLIT=0 fb $D/new_bench)"
done 2>&1 | tee "$OUT/bench_fwd.txt"
echo "== fwd benches done at $(el) s"
for rows in 32 64; do
  echo "new rule2 rows$rows case1: $(CAKEGRAD_KDA_STATE_ROWS=$rows CAKEGRAD_KDA_FWD_SPLIT=2 KDA_BENCH_CASES=1 fb $D/new_bench)"
done 2>&1 | tee -a "$OUT/bench_fwd.txt"
pack
NCU="ncu --clock-control none --metrics gpu__time_duration.sum -k regex:KdaChunk --csv"
KDA_BENCH_FWD_ONLY=1 timeout 45 $NCU $D/main_bench >"$OUT/ncu_main.csv" 2>&1; echo "ncu main rc=$? at $(el) s"
KDA_BENCH_FWD_ONLY=1 timeout 45 $NCU $D/new_bench >"$OUT/ncu_new.csv" 2>&1; echo "ncu new rc=$? at $(el) s"
pack
timeout 40 $D/new_bench >"$OUT/bench_full_new.txt" 2>&1; echo "full bench new rc=$? at $(el) s"
grep -E "median" "$OUT/bench_full_new.txt"
pack
python3 - "$OUT" <<'PY' || true
import csv, sys, statistics, collections
for tag in ("main", "new"):
    try:
        rows = list(csv.reader(open(f"{sys.argv[1]}/ncu_{tag}.csv")))
    except Exception as e:
        print(tag, e); continue
    hdr = None; d = collections.defaultdict(list); order = []
    for r in rows:
        if "Kernel Name" in r: hdr = r; continue
        if hdr and len(r) == len(hdr) and r[hdr.index("Metric Name")] == "gpu__time_duration.sum":
            k = r[hdr.index("Kernel Name")].split("(")[0][:60]
            d[k].append(float(r[hdr.index("Metric Value")].replace(",", "")))
    for k, v in d.items():
        print(tag, k, len(v), "launches; per block of 18:", [round(statistics.median(v[i:i+18]) / 1000, 3) for i in range(0, len(v), 18)])
PY
echo "== done at $(el) s"
