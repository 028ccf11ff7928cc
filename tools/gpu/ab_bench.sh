#!/usr/bin/env bash
# Runs ON the GPU machine: an A/B of kernel builds in one device call. Each variant is a folder
# DIR/<variant>/ holding the family's kernels-only bench binary (cakegrad_<family>_bench) and, for
# the variants to check, its GPU test binary (cakegrad_gpu_<family>_tests); build them here with
# -DCAKEGRAD_KERNELS_ONLY=ON, strip them and carry DIR.
#   0. with HASH_FILTER set: the bitwise gate. Every variant's test binary runs the gtest filter
#      HASH_FILTER (e.g. 'KdaKernels.*HashesForCrossBuildComparison'), once per offset in
#      HASH_OFFSETS (default "0"; KDA_HASH_SEED_OFFSET=offset: other pinned draws); a variant
#      whose printed hash lines differ from the reference's, or that prints none, is dropped
#      from steps 1-3 (named in $OUT/ab/hash_gate.txt). The reference is the first variant, or
#      HASH_REF (a hashes_*.txt of an earlier call's ab/ folder). HASH_KEEP=1 reports a
#      difference and keeps the variant (a candidate with new bits by design).
#   1. every variant's bench, ROUNDS times, alternating (all variants see the same machine
#      state), beside a 100 ms clock and power log;
#   2. a summary: per variant and table row, each round's time (the bench's median);
#   3. for each variant in CHECK: the whole family suite and one compute-sanitizer run a tool of
#      SANITIZE_TOOLS (default: sanitize_tools.sh, all four) on *Sanitize*, all in
#      parallel.
# Usage: bash tools/gpu/ab_bench.sh DIR FAMILY "base cand ..." [ROUNDS=3] ["cand ..."=CHECK]
# Env: BENCH_ENV (assignments for the bench, e.g. "CAKEGRAD_BENCH_REST_MS=500" for conv1d),
# BENCH_TIMEOUT (60 s a run), TEST_TIMEOUT (120 s a tool), SANITIZE_TOOLS, HASH_FILTER,
# HASH_OFFSETS, HASH_REF, HASH_KEEP. Logs and the summary go to $OUT/ab/.
set -uo pipefail
[ $# -ge 3 ] || { sed -n 2,21p "$0" >&2; exit 2; }
dir=$1 family=$2 variants=$3 rounds=${4:-3} check=${5:-}
case $family in conv1d | mhc | kda) ;; *) echo "family must be conv1d, mhc or kda" >&2; exit 2 ;; esac
export PATH=$PATH:/usr/local/cuda/bin
out=${OUT:-/tmp/cakegrad-out}/ab
mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,temperature.gpu \
  --format=csv; } > "$out/env.txt" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu \
  --format=csv -lms 100 > "$out/clocks.csv" 2>&1 &
smi=$!

# The bitwise gate: lines containing "hashes" from each variant, compared with the first's.
if [ -n "${HASH_FILTER:-}" ]; then
  ref="" kept="" kept_check=""
  if [ -n "${HASH_REF:-}" ]; then
    cp "$HASH_REF" "$out/hashes_HASH_REF.txt"
    ref=HASH_REF
  fi
  for v in $variants; do
    : > "$out/hashes_$v.txt"
    for o in ${HASH_OFFSETS:-0}; do
      KDA_HASH_SEED_OFFSET=$o timeout "${TEST_TIMEOUT:-120}" "$dir/$v/cakegrad_gpu_${family}_tests" \
        --gtest_filter="$HASH_FILTER" 2>&1 | grep 'hashes' | sed "s/^/offset $o: /" >> "$out/hashes_$v.txt"
    done
    if [ ! -s "$out/hashes_$v.txt" ]; then
      echo "$v: no hash lines: dropped"
    elif [ -z "$ref" ]; then
      ref=$v kept=$v
      echo "$v: reference ($(wc -l < "$out/hashes_$v.txt") lines)"
    elif cmp -s "$out/hashes_$ref.txt" "$out/hashes_$v.txt"; then
      kept="$kept $v"
      echo "$v: hash lines EQUAL $ref's"
    elif [ -n "${HASH_KEEP:-}" ]; then
      kept="$kept $v"
      echo "$v: hash lines DIFFER from $ref's: kept (HASH_KEEP)"
    else
      echo "$v: hash lines DIFFER from $ref's: dropped"
    fi
  done > "$out/hash_gate.txt"
  cat "$out/hash_gate.txt"
  for v in $check; do case " $kept " in *" $v "*) kept_check="$kept_check $v" ;; esac; done
  variants=$kept check=$kept_check
fi

bench="$out/bench.txt"
for ((r = 1; r <= rounds; ++r)); do
  for v in $variants; do
    echo "=== $v round $r $(date -u +%T.%N)" >> "$bench"
    env ${BENCH_ENV:-} timeout "${BENCH_TIMEOUT:-60}" "$dir/$v/cakegrad_${family}_bench" >> "$bench" 2>&1
    echo "=== $v done rc=$? $(date -u +%T.%N)" >> "$bench"
  done
done
kill "$smi" 2> /dev/null

# One line per variant and row: the row's label, then its time in every round. Each bench prints
# its own table: conv1d "| op | S | C | policy | bias | loads | median us | ...", mhc
# "| function | T | median ms | ...", kda "<shape> fwd|bwd [chunked] median <ms> ms ...".
awk -v fam="$family" '
  /^=== .* round / { v = $2; next }
  fam == "conv1d" && /^\| (forward|backward) / {
    split($0, f, "|"); k = ""
    for (i = 2; i <= 7; ++i) { gsub(/ /, "", f[i]); k = k " " f[i] }
    gsub(/ /, "", f[8]); t[v k] = t[v k] " " f[8]; next }
  fam == "mhc" && /^\| [a-z_+]+ \| [0-9]+ \| [0-9.]+ / {
    split($0, f, "|"); gsub(/ /, "", f[2]); gsub(/ /, "", f[3]); gsub(/ /, "", f[4])
    k = " " f[2] " T=" f[3]; t[v k] = t[v k] " " f[4]; next }
  fam == "kda" && / median / {
    i = index($0, " median "); k = substr($0, 1, i - 1); gsub(/  +/, " ", k); sub(/ $/, "", k)
    split(substr($0, i + 8), f, " "); t[v " " k] = t[v " " k] " " f[1]; next }
  /copy/ { for (i = 1; i <= NF; ++i) if ($i ~ /^GB\/s/ && i > 1) c[v] = c[v] " " $(i - 1) }
  END { for (k in t) print k ":" t[k]; for (k in c) print "copy " k ":" c[k] }
' "$bench" | sort > "$out/summary.txt"

source "$(dirname "${BASH_SOURCE[0]}")/sanitize_tools.sh"
tools=$SANITIZE_TOOLS
pids=()
for v in $check; do
  tests="$dir/$v/cakegrad_gpu_${family}_tests"
  to=${TEST_TIMEOUT:-120}
  (timeout "$to" "$tests" > "$out/tests_$v.log" 2>&1; echo "rc=$?" >> "$out/tests_$v.log") &
  pids+=($!)
  for tool in $tools; do
    (timeout "$to" compute-sanitizer --tool $tool --error-exitcode 9 "$tests" \
      --gtest_filter='*Sanitize*' > "$out/${tool}_$v.log" 2>&1
     echo "rc=$?" >> "$out/${tool}_$v.log") &
    pids+=($!)
  done
done
[ ${#pids[@]} -eq 0 ] || wait "${pids[@]}"

cat "$out/summary.txt"
for v in $check; do
  echo "--- $v"
  grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY" \
    "$out/tests_$v.log" $(for t in $tools; do echo "$out/${t}_$v.log"; done) | head -20
done
