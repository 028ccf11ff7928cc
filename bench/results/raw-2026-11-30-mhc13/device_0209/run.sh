#!/bin/bash
# mhc13's forward_prepare candidates (never run on the device when written): one device call.
# Carry .carry/mhc13 (base = main bd5011b, candA = 79450ca, candB = 93689f2, candC = 91042e7; each
# DIR/<v>/ holds cakegrad_mhc_bench, cakegrad_gpu_mhc_tests and fhash, stripped; build.sh beside
# this script makes them) and run, from the repository root:
#   bash .carry/mhc13/run.sh          (run tool: carry [".carry/mhc13"], timeout_s 300)
# 1. fhash (helper mhc9's forward fingerprint: stats of forward_stats, stats and U of
#    forward_prepare, garbage-filled outputs and workspace, 8 shapes) per build; a candidate goes
#    on only if it finished (rc=0, which includes forward_stats == forward_prepare) with base's
#    exact output. A hang (a deadlocked cluster kernel) costs its 25 s timeout and nothing more.
# 2. tools/gpu/ab_bench.sh: the benches alternating, 3 rounds, then the whole suite, memcheck and
#    racecheck (*Sanitize*) of each candidate that went on.
# Everything lands under $OUT: summary.txt and logs.tgz.
D=${D:-.carry/mhc13}
L=$OUT/l
mkdir -p "$L"
S=$OUT/summary.txt
export PATH=$PATH:/usr/local/cuda/bin
{ date -u; cat "$D/SOURCE.txt"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > "$S" 2>&1
V="candA candB candC"
for v in base $V; do
  (timeout 25 "$D/$v/fhash" > "$L/h_$v.txt" 2>&1; echo "rc=$?" >> "$L/h_$v.txt") &
done
wait
OKV=""
for v in $V; do
  grep -q "^rc=0$" "$L/h_$v.txt" && diff -q "$L/h_base.txt" "$L/h_$v.txt" > /dev/null && OKV="$OKV $v"
done
{ echo "fingerprint identical to base (rc=0, stats of forward_stats == forward_prepare's):$OKV"
  cat "$L/h_base.txt"
  for v in $V; do echo "-- diff base $v"; diff "$L/h_base.txt" "$L/h_$v.txt"; done; } >> "$S"
OKV=${OKV# }
if [ -n "$OKV" ]; then
  BENCH_TIMEOUT=20 TEST_TIMEOUT=100 bash tools/gpu/ab_bench.sh "$D" mhc "base $OKV" 3 "$OKV" \
    > "$L/ab_stdout.txt" 2>&1
  cat "$L/ab_stdout.txt" >> "$S"
  # Mean of the rounds per variant and row (ab_bench's summary lists each round).
  awk -F: '/^(base|cand)/ { n = split($2, r, " "); s = 0; for (i = 1; i <= n; ++i) s += r[i];
    if (n) printf "%s mean %.4f (n=%d)\n", $1, s / n, n }' "$OUT/ab/summary.txt" | sort >> "$S"
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> "$S" 2>&1
date -u >> "$S"
cp "$S" "$L/"
[ -d "$OUT/ab" ] && mv "$OUT/ab" "$L/ab"
tar czf "$OUT/logs.tgz" -C "$OUT" l && rm -rf "$L"
cat "$S"
