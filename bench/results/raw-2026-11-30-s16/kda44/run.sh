#!/usr/bin/env bash
# kda44 (sixteenth session): kda43's binaries again (carry .carry/kda43x). Paired draws: the seeds
# of kda43's worst dA_log draws on every variant; 100 more fresh fastdecay draws on base and bs;
# the grad kernel's ncu source profile on bs and bsu (why bsu's blocked Uv solve is slower).
set -uo pipefail
D=.carry/kda43
final=${OUT:-/tmp/out}; mkdir -p "$final"; out=$(mktemp -d)
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda44.tgz" -C "$out" .; }
tar xJf .carry/kda43x/kda43.tar.xz -C .carry
F=Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference
for v in base bs bsu; do
  for sd in 2857004341 1125404555 389390865 523861994 3606069367 1828221468; do
    echo "$v fastdecay $sd $(KDA_TEST_SEED=$sd timeout 20 $D/$v/cakegrad_gpu_kda_tests \
      --gtest_filter="$F/B2_T1000_H4_fastdecay" 2>&1 | grep -E ' dA_log ' | sed -E 's/.*rel-L2 //')"
  done
  for sd in 3623010256 1655624651 1825632507 2968236283 213725983 2904552659; do
    echo "$v T65 $sd $(KDA_TEST_SEED=$sd timeout 20 $D/$v/cakegrad_gpu_kda_tests \
      --gtest_filter="$F/B2_T65_H1*" 2>&1 | grep -E ' dA_log ' | sed -E 's/.*rel-L2 //')"
  done
done | tee "$out/paired.txt"; echo "paired at $(el) s"
for v in base bs; do
  tag=B2_T1000_H4_fastdecay
  timeout 90 $D/$v/cakegrad_gpu_kda_tests --gtest_filter="$F/$tag" --gtest_repeat=100 > "$out/tail_${v}_$tag.log" 2>&1
  awk '/^\[ seed \]/ {seed=$4} $7=="dA_log" {print $9, seed}' "$out/tail_${v}_$tag.log" | sort -g > "$out/tail_${v}_$tag.sorted"
  echo "$v $tag: $(wc -l < "$out/tail_${v}_$tag.sorted") draws, over 1e-4: $(awk '$1 > 1e-4' "$out/tail_${v}_$tag.sorted" | wc -l), over 3e-5: $(awk '$1 > 3e-5' "$out/tail_${v}_$tag.sorted" | wc -l), median $(awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' "$out/tail_${v}_$tag.sorted"), worst: $(tail -2 "$out/tail_${v}_$tag.sorted" | tr '\n' ' ') at $(el) s"
done | tee "$out/tail_summary.txt"
pack
for v in bs bsu; do
  [ "$(el)" -lt 330 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 60 ncu --clock-control none \
    --import-source no --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section SourceCounters -k regex:KdaChunkGradKernel -c 1 -o /tmp/grad_$v $D/$v/cakegrad_kda_bench > "$out/ncu_grad_$v.log" 2>&1
  timeout 15 ncu -i /tmp/grad_$v.ncu-rep --page details > "$out/ncu_grad_$v.txt" 2>&1
  timeout 25 ncu -i /tmp/grad_$v.ncu-rep --page source --csv --print-source sass > "$out/ncu_src_$v.csv" 2>/dev/null
  gzip -f "$out/ncu_src_$v.csv"
  echo "$v: $(grep -E 'Duration' "$out/ncu_grad_$v.txt" | head -1) at $(el) s"
done
pack; echo "== done at $(el) s"
