# Sourced by the per-call scripts of kernel A/B calls (bench/results/raw-*/kdaNN/run.sh), after
# tools/gpu/ab_bench.sh: the steps those scripts kept writing out again. Each writes its logs to
# $AB_OUT (default $OUT) and prints one summary line per variant.
#   ab_call NAME             a fresh $AB_OUT, D=.carry/NAME, then ab_start NAME
#   ab_start NAME            the call's clock, the GPU line, and ab_pack (re-packs $AB_OUT as
#                            $OUT_FINAL/NAME.tgz, so a call cut short still returns what finished)
#   ab_ncu_time DIR "V ..."  each variant's grad-kernel time (ncu gpu__time_duration, locked
#                            clocks) at bench case 0, skipped once $(ab_el) passes AB_NCU_UNTIL
#   ab_ncu_case BIN CASE LOG  every kernel of one chunked backward at bench case CASE of the KDA
#                            bench BIN (ncu gpu__time_duration; the raw report in LOG): the
#                            preparation, the checkpoint pass, the chain, the grad kernel and the
#                            reduce, a "kernel time" line each (tools/gpu/final_build_call.sh too)
#   ab_ncu_kernels DIR "V ..." ["CASES"]   ab_ncu_case for each variant and case (default
#                            "0 1 2"), skipped once $(ab_el) passes AB_NCU_UNTIL
#   ab_dalog_tail DIR V TAG N   N fresh draws of the chunked backward's accuracy test TAG
#                            (tools/gpu/kda_draws_call.sh, from a random seed base): the count
#                            over 1e-4, the median, p90 and the worst with its seed
#   ab_paired_tails DIR "BASE CAND" "TAG ..." N SEED_BASE   the same N draws (KDA_TEST_SEED_BASE)
#                            for both builds at each TAG, all in parallel, one process each:
#                            ab_tails_pairs with TAG:N:1:SEED_BASE for every TAG
#   ab_tails_pairs DIR "BASE CAND" "TAG:N:PROCS:SEED ..."   ab_tails_start for each spec, all in
#                            parallel, then `wait` and ab_tails_summary over the specs' TAGs
#   ab_tails_start DIR "BASE CAND" TAG N PROCS SEED   in the background: PROCS processes per build
#                            of N draws of TAG each, process p seeded SEED + 100000 p (both builds
#                            the same draws); after `wait`, ab_tails_summary "BASE CAND" "TAG ..."
#                            pairs them per TAG: counts over 1e-4, 3e-5 and 1e-5, the medians, the
#                            draws CAND does better on, the worst two of each
#   ab_kda_gate DIR "BASE CAND" ROUNDS   tools/gpu/ab_bench.sh on the chunked backward (ROUNDS
#                            alternating chunked-only bench rounds, the hash gate of
#                            ChunkedBackwardHashesForCrossBuildComparison kept either way, the suite
#                            and the sanitizers on CAND) into $AB_OUT/ab_stdout.txt, printed
#   ab_mhc_bench DIR "V ..." "CHECK ..." TS [HIDE]   tools/gpu/ab_bench.sh on the mHC kernels (3
#                            alternating bench rounds at T in TS, e.g. "4096,16384"; the suite and
#                            the sanitizers on each CHECK; HASH_FILTER passed through) into
#                            $AB_OUT/ab_stdout.txt; prints its lines but those matching HIDE (a grep
#                            pattern; default the backward and forward_finish rows), then each
#                            CHECK's C = 4096 accuracy lines
#   ab_mhc_diag BIN "CASE ..."   the MhcDiag.* stamps test of BIN (a diagnostic build) into
#                            $AB_OUT/diag.txt; prints its summary lines, then the per-CTA lines of
#                            each CASE ("T:KIND:REP", e.g. 16384:stats:2)
#   ab_pair_sequential BIN TAG SEED N   one process: N draws of TAG by the KDA test binary BIN with
#                            KDA_PAIR_SEQUENTIAL=1 (the chunked and the sequential backward on the
#                            same inputs), "seed chunked sequential" lines to pairs/pairs_TAG_SEED;
#                            after `wait`, ab_pair_summary "TAG ..." counts and worst draws per TAG
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
ab_call() {
  AB_OUT=$(mktemp -d)
  D=.carry/$1
  ab_start "$1"
}
# The "seed dA_log" pair of every draw in a KdaChunkedBackwardAccuracy log (stdin).
ab_draws() { awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {print seed, $9}'; }
# The median of column COL of FILE.
ab_median() { awk -v c="$2" '{print $c}' "$1" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
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
ab_ncu_case() {
  # 36 launches skipped: the bench's warm-up calls; 6 kernels: one backward and the next call's
  # first. ncu's progress lines name the kernels too, so they go before the pairing.
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=$2 timeout 30 ncu --metrics gpu__time_duration.sum \
    -k regex:Kda --launch-skip 36 -c 6 "$1" > "$3" 2>&1
  grep -v '==PROF==' "$3" | grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" | paste - - |
    sed -E 's/\(.*gpu__time_duration.sum/ /; s/ +/ /g' | head -6
}
ab_ncu_kernels() {
  local dir=$1 v c
  for v in $2; do
    for c in ${3:-0 1 2}; do
      [ "$(ab_el)" -lt "${AB_NCU_UNTIL:-400}" ] || break 2
      echo "$v case $c:"
      ab_ncu_case "$dir/$v/cakegrad_kda_bench" "$c" "$AB_OUT/ncu_${v}_$c.txt"
    done
  done | tee -a "$AB_OUT/ncu_summary.txt"
}
ab_dalog_tail() {
  OUT=$AB_OUT LIMIT_S="${AB_TAIL_TIMEOUT:-90}" bash tools/gpu/kda_draws_call.sh \
    "$1/$2/cakegrad_gpu_kda_tests" "Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/$3*" \
    "$4" "$((RANDOM * 32768 + RANDOM))" | tee -a "$AB_OUT/tail_summary.txt"
}
ab_paired_tails() {
  local dir=$1 pair=$2 tags=$3 n=$4 seed=$5 tag specs=""
  for tag in $tags; do specs+=" $tag:$n:1:$seed"; done
  ab_tails_pairs "$dir" "$pair" "$specs"
}
ab_tails_pairs() {
  local dir=$1 pair=$2 spec tag n procs seed tags=""
  for spec in $3; do
    IFS=: read -r tag n procs seed <<< "$spec"
    ab_tails_start "$dir" "$pair" "$tag" "$n" "$procs" "$seed"
    tags+=" $tag"
  done
  wait
  ab_tails_summary "$pair" "$tags"
}
ab_tails_start() {
  local dir=$1 pair=$2 tag=$3 n=$4 procs=$5 seed=$6 v p
  for v in $pair; do
    for p in $(seq 0 $((procs - 1))); do
      KDA_TEST_SEED_BASE=$((seed + p * 100000)) timeout "${AB_TAIL_TIMEOUT:-200}" \
        "$dir/$v/cakegrad_gpu_kda_tests" \
        --gtest_filter="Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/$tag" \
        --gtest_repeat="$n" 2>&1 | ab_draws > "$AB_OUT/tail_${v}_${tag}_$p.txt" &
    done
  done
}
ab_tails_summary() {
  local b c tag v
  read -r b c <<< "$1"
  for tag in $2; do
    cat "$AB_OUT"/tail_${b}_${tag}_*.txt | sort > "$AB_OUT/b.txt"
    cat "$AB_OUT"/tail_${c}_${tag}_*.txt | sort > "$AB_OUT/c.txt"
    join "$AB_OUT/b.txt" "$AB_OUT/c.txt" > "$AB_OUT/paired_$tag.txt"
    awk -v t="$tag" -v b="$b" -v c="$c" '{n++; b4+=($2>1e-4); c4+=($3>1e-4); b3+=($2>3e-5); c3+=($3>3e-5);
        b1+=($2>1e-5); c1+=($3>1e-5); if ($3<$2) w++}
      END {print t": "n" paired draws; over 1e-4 "b" "b4" "c" "c4"; over 3e-5 "b" "b3" "c" "c3"; over 1e-5 "b" "b1" "c" "c1"; "c" lower on "w}' \
      "$AB_OUT/paired_$tag.txt"
    for v in 2 3; do echo "  col $v median $(ab_median "$AB_OUT/paired_$tag.txt" $v)"; done
    sort -k2 -g "$AB_OUT/paired_$tag.txt" | tail -2 | sed "s/^/  worst $b: /"
    sort -k3 -g "$AB_OUT/paired_$tag.txt" | tail -2 | sed "s/^/  worst $c: /"
  done | tee -a "$AB_OUT/tail_summary.txt"
  rm -f "$AB_OUT"/tail_*_*_[0-9].txt "$AB_OUT/b.txt" "$AB_OUT/c.txt"
}
ab_pair_sequential() {
  local bin=$1 tag=$2 seed=$3 n=$4 log
  mkdir -p "$AB_OUT/pairs"
  log=$AB_OUT/pairs/log_${tag}_$seed.txt
  KDA_PAIR_SEQUENTIAL=1 KDA_TEST_SEED_BASE=$seed timeout "${AB_TAIL_TIMEOUT:-300}" "$bin" \
    --gtest_filter="Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/$tag" \
    --gtest_repeat="$n" > "$log" 2>&1
  awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {v[$3]=$9; if ($3=="sequential") print seed, v["chunked"], v["sequential"]}' \
    "$log" > "$AB_OUT/pairs/pairs_${tag}_$seed.txt"
}
ab_pair_summary() {
  local tag
  for tag in $1; do
    cat "$AB_OUT"/pairs/pairs_${tag}_*.txt > "$AB_OUT/pairs/all_$tag.txt"
    awk -v t="$tag" '{n++; c+=($2>1e-4); s+=($3>1e-4); c3+=($2>3e-5); s3+=($3>3e-5); c1+=($2>1e-5); s1+=($3>1e-5)}
      END {print t": "n" draws; over 1e-4 chunked "c" sequential "s"; over 3e-5 chunked "c3" sequential "s3"; over 1e-5 chunked "c1" sequential "s1}' \
      "$AB_OUT/pairs/all_$tag.txt"
    sort -k2 -g "$AB_OUT/pairs/all_$tag.txt" | tail -2 | sed 's/^/  worst chunked: /'
  done | tee "$AB_OUT/pairs/summary.txt"
  grep -h "FAILED\|Failure" "$AB_OUT"/pairs/log_*.txt | sort | uniq -c | head
}
ab_kda_gate() {
  local dir=$1 pair=$2 rounds=$3 cand
  cand=${pair#* }
  OUT=$AB_OUT BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=40 TEST_TIMEOUT=150 \
    HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' HASH_KEEP=1 \
    timeout 240 bash tools/gpu/ab_bench.sh "$dir" kda "$pair" "$rounds" "$cand" \
    > "$AB_OUT/ab_stdout.txt" 2>&1
  echo "== ab rc=$? at $(ab_el) s"
  cat "$AB_OUT/ab_stdout.txt"
}
ab_mhc_bench() {
  local dir=$1 variants=$2 check=$3 ts=$4 hide=${5:-backward_\|forward_finish}
  OUT=$AB_OUT BENCH_ENV="MHC_BENCH_T=$ts" BENCH_TIMEOUT=60 TEST_TIMEOUT=200 \
    timeout 400 bash tools/gpu/ab_bench.sh "$dir" mhc "$variants" "${ROUNDS:-3}" "$check" \
    > "$AB_OUT/ab_stdout.txt" 2>&1
  echo "== ab rc=$? at $(ab_el) s"
  grep -v "$hide" "$AB_OUT/ab_stdout.txt"
  local c
  for c in $check; do
    grep "rel-L2 T=4\|rel-L2 T=16384 C=4096" "$AB_OUT/ab/tests_$c.log" | sed "s/^/$c /"
  done
}
ab_mhc_diag() {
  local bin=$1 case t kind rep
  timeout 120 "$bin" --gtest_filter='MhcDiag.*' > "$AB_OUT/diag.txt" 2>&1
  grep -E "^diag|PASS|FAIL" "$AB_OUT/diag.txt"
  for case in $2; do
    IFS=: read -r t kind rep <<< "$case"
    grep -A42 "T=$t $kind rep $rep" "$AB_OUT/diag.txt" | head -43
  done
}
