#!/usr/bin/env bash
# kda14: one device call for the packed forward's last percent, all candidates meant to be bitwise
# main's (d920723):
#   base = main d920723
#   A    = main + kda-s12-c3's o warps at 32 rows (94d8afa ported)
#   B    = main + only kda-s13's warp-0 document search in the preparation (17635ee ported)
#   C    = A + B
#   run: {"command": "bash .carry/kda14/run.sh", "carry": [".carry/kda14"], "timeout_s": 300}
# 1. copy rate; 2. hash lines of the four builds (bitwise gate); 3. forward-only A/B, 5
# alternating rounds; 4. the best bitwise candidate (lowest sum over the three shapes of its mean
# time / base's) gets the whole suite, memcheck and racecheck on *Sanitize* (the 64-row problem
# apart), beside a full-set ncu of its preparation kernel at the packed shape split at barriers
# (bench/ncu_sass_segments.py); 5. a wave probe of the preparation (ncu at three T); 6. the full
# bench of base and the best if time is left.
# Bounded to ~270 s; logs in $OUT/kda14.tgz.
set -uo pipefail
D=.carry/kda14
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda14.tgz" -C "$out" .; }
V="base A B C"
{ date -u +%FT%TZ; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
  --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
for b in $V; do
  timeout 25 $D/$b/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' \
    > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?: $(grep -h 'kda hashes' $out/hash_$b.log | tr '\n' ' ')"
done
ok=""
for b in A B C; do
  if [ -n "$(grep -h 'kda hashes' $out/hash_base.log)" ] &&
     [ "$(grep -h 'kda hashes' $out/hash_base.log)" = "$(grep -h 'kda hashes' $out/hash_$b.log)" ]; then
    echo "$b: hash lines EQUAL base's"; ok="$ok $b"
  else echo "$b: hash lines DIFFER from base's (not bitwise: do not ship)"; fi
done | tee "$out/hash_compare.txt"
ok=$(awk '/EQUAL/{sub(":","",$1); printf " %s", $1}' "$out/hash_compare.txt")
echo "== hashes done at $(el) s; bitwise:$ok"; pack
OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1" BENCH_TIMEOUT=20 \
  timeout 110 bash tools/gpu/ab_bench.sh $D kda "$V" 5 ""
echo "== ab done at $(el) s"; cat "$out/ab/summary.txt"; pack
best=$(awk -F: -v ok="$ok" '
  / fwd:/ { split($1, a, " "); v = a[1]; k = substr($1, length(v) + 2); n = split($2, x, " ")
    s = 0; for (i = 1; i <= n; ++i) s += x[i]; m[v, k] = s / n; keys[k] = 1; vs[v] = 1 }
  END { bs = 1e9; b = "C"
    for (v in vs) { if (v == "base" || index(" " ok " ", " " v " ") == 0) continue
      sc = 0; for (k in keys) sc += m[v, k] / m["base", k]
      printf "score %s %.4f\n", v, sc > "/dev/stderr"; if (sc < bs) { bs = sc; b = v } }
    print b }' "$out/ab/summary.txt" 2> "$out/score.txt")
cat "$out/score.txt"; echo "best: $best" | tee -a "$out/score.txt"
T=$D/$best/cakegrad_gpu_kda_tests
(timeout 120 $T > "$out/tests_$best.log" 2>&1; echo "rc=$?" >> "$out/tests_$best.log") &
p1=$!
(timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/memcheck_$best.log" 2>&1; echo "rc=$?" >> "$out/memcheck_$best.log") &
p2=$!
(timeout 130 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='*Sanitize*:-*SixtyFour*' > "$out/racecheck_$best.log" 2>&1
 echo "rc=$?" >> "$out/racecheck_$best.log") &
p3=$!
(timeout 130 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='*SixtyFour*' > "$out/racecheck64_$best.log" 2>&1
 echo "rc=$?" >> "$out/racecheck64_$best.log") &
p4=$!
# The preparation's stalls by stretch (the checks share the GPU: durations indicative only).
KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=2 timeout 60 ncu --clock-control none --set full \
  --import-source no -k regex:KdaChunkPrep --launch-skip 3 -c 1 -o /tmp/kda14_prep \
  $D/$best/cakegrad_kda_bench > "$out/ncu_prep_$best.log" 2>&1
echo "ncu full prep $best rc=$? at $(el) s"
timeout 15 ncu -i /tmp/kda14_prep.ncu-rep --page details > "$out/details_prep_$best.txt" 2>&1
timeout 15 ncu -i /tmp/kda14_prep.ncu-rep --page source --csv --print-source sass \
  > "$out/src_prep_$best.csv" 2>&1
timeout 10 python3 bench/ncu_sass_segments.py "$out/src_prep_$best.csv" \
  > "$out/segments_prep_$best.txt" 2>&1
cat "$out/segments_prep_$best.txt" | head -30
grep -E "Duration|Issued Ipc|Eligible Warps|Warp Cycles Per Issued|L2 Cache Throughput|Achieved Occ" \
  "$out/details_prep_$best.txt" | head -8
pack
wait $p1 $p2 $p3 $p4
echo "== checks done at $(el) s"
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
  "$out/tests_$best.log" "$out/memcheck_$best.log" "$out/racecheck_$best.log" \
  "$out/racecheck64_$best.log" | head -24
pack
# Wave probe (the GPU alone again): the preparation at (1, T, 16) with T = 32768 (8192 CTAs, 31.03
# waves of 2 x 132) against 32704 (8176 CTAs, 30.97 waves) and 33792 (8448, exactly 32 waves):
# a tail wave costs a CTA time (~37 us), not 0.2% of the work. C's bench (KDA_BENCH_T).
M=gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.max,gpc__cycles_elapsed.max
for t in 32768 32704 33792; do
  [ $(el) -lt 225 ] || break
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=1 KDA_BENCH_T=$t timeout 25 ncu --clock-control none \
    --metrics $M -k regex:KdaChunkPrep --launch-skip 3 --launch-count 3 --csv $D/C/cakegrad_kda_bench \
    > "$out/ncu_wave_T$t.csv" 2>&1
  echo "wave probe T=$t rc=$? at $(el) s"
  awk -F'","' '/duration|cycles/{print $13, $15}' "$out/ncu_wave_T$t.csv"
done
pack
for b in base $best; do
  [ $(el) -lt 235 ] || break
  timeout 30 $D/$b/cakegrad_kda_bench > "$out/full_bench_$b.txt" 2>&1
  echo "full bench $b rc=$? at $(el) s"; grep median "$out/full_bench_$b.txt"
done
pack
echo "== done at $(el) s"
