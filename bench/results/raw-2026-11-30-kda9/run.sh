#!/usr/bin/env bash
# kda9 (never run yet): the next session's one device call for the kda-s9 candidate (fast gate
# sigmoid / rsqrt in the chunked kernels, Uv = Tinv' V straight from the staged V). Values change
# (not bitwise main's), so no hash equality is expected; accuracy comes from the suite.
#   run: {"command": "bash .carry/kda9/run.sh", "carry": [".carry/kda9"], "timeout_s": 480}
# 1. copy rate; 2. ab_bench.sh: forward-only bench main / cand alternating x3, then cand's whole
#    suite, memcheck and racecheck on KdaKernels.Sanitize*; 3. one full bench per variant
#    (chunked backward: its checkpoint recompute runs the new preparation); 4. ncu per-kernel time
#    and executed warp instructions of the preparation, base and cand (the predicted count);
#    5. both hash lines (for the record). Logs tarred into $OUT/kda9.tgz.
set -uo pipefail
D=.carry/kda9
final=${OUT:-/tmp/out}
out=$(mktemp -d)  # logs here, tarred into $final/kda9.tgz (at most 8 files come back)
mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s)
el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda9.tgz" -C "$out" .; }
timeout 15 $D/copybw > "$out/copy.txt" 2>&1
cat "$out/copy.txt"
OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1" BENCH_TIMEOUT=30 TEST_TIMEOUT=150 \
  timeout 240 bash tools/gpu/ab_bench.sh $D kda "base cand" 3 "cand"
echo "== ab done at $(el) s"
pack
for v in base cand; do
  timeout 30 $D/$v/cakegrad_kda_bench > "$out/full_bench_$v.txt" 2>&1
  echo "full bench $v rc=$? at $(el) s"; grep median "$out/full_bench_$v.txt"
done
pack
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
for v in base cand; do
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=0 timeout 45 ncu --clock-control none --metrics $M \
    -k regex:KdaChunkPrep -c 3 --csv $D/$v/cakegrad_kda_bench > "$out/ncu_prep_$v.csv" 2>&1
  echo "ncu $v rc=$? at $(el) s"
  grep -E "inst_executed.sum|duration|per_cycle" "$out/ncu_prep_$v.csv" | tail -3
done
for v in base cand; do
  timeout 20 $D/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' \
    > "$out/hash_$v.log" 2>&1
  grep -i "hash" "$out/hash_$v.log" | head -6
done
pack
echo "== done at $(el) s"
