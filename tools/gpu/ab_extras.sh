# Sourced by the per-call scripts of kernel A/B calls (bench/results/raw-*/kdaNN/run.sh), after
# tools/gpu/ab_bench.sh: the steps those scripts kept writing out again. Each writes its logs to
# $AB_OUT (default $OUT) and prints one summary line per variant.
#   ab_start NAME            the call's clock, the GPU line, and ab_pack (re-packs $AB_OUT as
#                            $OUT_FINAL/NAME.tgz, so a call cut short still returns what finished)
#   ab_ncu_time DIR "V ..."  each variant's grad-kernel time (ncu gpu__time_duration, locked
#                            clocks) at bench case 0, skipped once $(ab_el) passes AB_NCU_UNTIL
#   ab_dalog_tail DIR V TAG N   N fresh draws of the chunked backward's accuracy test TAG: the
#                            count over 1e-4 and 3e-5, the median and the worst two with seeds
export PATH=$PATH:/usr/local/cuda/bin
AB_OUT=${AB_OUT:-${OUT:-/tmp/out}}
mkdir -p "$AB_OUT"
ab_start() {
  AB_NAME=$1
  AB_T0=$(date +%s)
  OUT_FINAL=${OUT_FINAL:-${OUT:-/tmp/out}}
  mkdir -p "$OUT_FINAL"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
}
ab_el() { echo $(($(date +%s) - AB_T0)); }
ab_pack() { tar czf "$OUT_FINAL/$AB_NAME.tgz" -C "$AB_OUT" .; }
ab_ncu_time() {
  local dir=$1 v
  for v in $2; do
    [ "$(ab_el)" -lt "${AB_NCU_UNTIL:-400}" ] || break
    KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
      -k regex:KdaChunkGrad --launch-skip 6 -c 1 "$dir/$v/cakegrad_kda_bench" \
      > "$AB_OUT/ncu_${v}_0.txt" 2>&1
    echo "ncu $v case 0: $(grep -E 'gpu__time_duration' "$AB_OUT/ncu_${v}_0.txt" | tail -1)"
  done | tee -a "$AB_OUT/ncu_summary.txt"
}
ab_dalog_tail() {
  local dir=$1 v=$2 tag=$3 n=$4
  local log=$AB_OUT/tail_${v}_$tag.log sorted=$AB_OUT/tail_${v}_$tag.sorted
  timeout "${AB_TAIL_TIMEOUT:-90}" "$dir/$v/cakegrad_gpu_kda_tests" \
    --gtest_filter="Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/$tag*" \
    --gtest_repeat="$n" > "$log" 2>&1
  awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {print $9, seed}' "$log" | sort -g > "$sorted"
  echo "$v $tag: $(wc -l < "$sorted") draws, over 1e-4: $(awk '$1 > 1e-4' "$sorted" | wc -l)," \
    "over 3e-5: $(awk '$1 > 3e-5' "$sorted" | wc -l)," \
    "median $(awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' "$sorted")," \
    "worst: $(tail -2 "$sorted" | tr '\n' ' ') at $(ab_el) s" | tee -a "$AB_OUT/tail_summary.txt"
}
