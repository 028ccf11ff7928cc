#!/usr/bin/env bash
# kda15 (NEVER RUN YET; written at the end of the tenth session without device time): the state
# pass as a programmatic dependent launch of the preparation (branch kda-s15-pdl), meant to be
# bitwise main's (only launch order changes; host emulator hash b7b5025fad63f41d).
#   base = main ee3fc0f (kernels of a0baeb4), pdl = kda-s15-pdl f540127; .carry/kda15/SOURCE
#   run: {"command": "bash .carry/kda15/run.sh", "carry": [".carry/kda15"], "timeout_s": 330}
# 1. copy rate; 2. hash lines of both (bitwise gate); 3. forward-only A/B, 7 alternating rounds
# (the expected gain is a few us: the packed forward is 1.876 ms against its 1.87 target);
# 4. pdl's whole suite (graph replay with a programmatic edge included), memcheck and racecheck
# on *Sanitize*; 5. the full bench of both (the chunked backward's recompute launches the same
# pair) if time is left. Logs in $OUT/kda15.tgz.
# Rebuild: Release -DCAKEGRAD_KERNELS_ONLY=ON, ninja cakegrad_gpu_kda_tests cakegrad_kda_bench
# at each commit, strip --strip-debug, into .carry/kda15/{base,pdl}/ (+ copybw from .carry/kda14).
set -uo pipefail
D=.carry/kda15
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda15.tgz" -C "$out" .; }
{ date -u +%FT%TZ; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
  --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
for b in base pdl; do
  timeout 25 $D/$b/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' \
    > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?: $(grep -h 'kda hashes' $out/hash_$b.log | tr '\n' ' ')"
done
if [ -n "$(grep -h 'kda hashes' $out/hash_base.log)" ] &&
   [ "$(grep -h 'kda hashes' $out/hash_base.log)" = "$(grep -h 'kda hashes' $out/hash_pdl.log)" ]; then
  echo "pdl: hash lines EQUAL base's"
else echo "pdl: hash lines DIFFER from base's (do not ship)"; fi | tee "$out/hash_compare.txt"
pack
OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1" BENCH_TIMEOUT=20 \
  timeout 120 bash tools/gpu/ab_bench.sh $D kda "base pdl" 7 ""
echo "== ab done at $(el) s"; cat "$out/ab/summary.txt"; pack
T=$D/pdl/cakegrad_gpu_kda_tests
(timeout 120 $T > "$out/tests_pdl.log" 2>&1; echo "rc=$?" >> "$out/tests_pdl.log") &
(timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/memcheck_pdl.log" 2>&1; echo "rc=$?" >> "$out/memcheck_pdl.log") &
(timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/racecheck_pdl.log" 2>&1; echo "rc=$?" >> "$out/racecheck_pdl.log") &
wait
for f in tests memcheck racecheck; do
  echo "$f: $(grep -hE 'PASSED|FAILED|SUMMARY|^rc=' "$out/${f}_pdl.log" | tr '\n' ' ')"
done | tee "$out/checks.txt"
echo "== checks done at $(el) s"; pack
for b in base pdl; do
  [ $(el) -lt 250 ] || break
  timeout 35 $D/$b/cakegrad_kda_bench > "$out/full_bench_$b.txt" 2>&1
  echo "full bench $b rc=$? at $(el) s"; grep -E "median" "$out/full_bench_$b.txt"
done
pack
