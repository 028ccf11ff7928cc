#!/usr/bin/env bash
# kda22s: base (main) vs next3 (main + kda-s22-next's grad-kernel commits) on many pinned draws:
# ChunkedBackwardHashesForCrossBuildComparison with KDA_HASH_SEED_OFFSET = 1..N (3 problems each,
# workspace + every output hashed). Lead, twelfth session.
#   run: {"command": "N=12 bash .carry/kda22s/run.sh", "carry": [".carry/kda22s"], "timeout_s": 120}
set -uo pipefail
D=.carry/kda22s; out=${OUT:-/tmp/out}; mkdir -p "$out"
S=$(date +%s); eq=0; ne=0
for ((s = 1; s <= ${N:-12}; ++s)); do
  [ $(($(date +%s) - S)) -lt ${BUDGET:-80} ] || break
  for b in base next3; do
    KDA_HASH_SEED_OFFSET=$s timeout 20 $D/$b/cakegrad_gpu_kda_tests \
      --gtest_filter='KdaKernels.ChunkedBackwardHashes*' 2>&1 | grep 'kda bwd hashes' > "$out/h_${b}_$s.txt"
  done
  if [ "$(wc -l < $out/h_base_$s.txt)" = 3 ] && cmp -s "$out/h_base_$s.txt" "$out/h_next3_$s.txt"; then
    eq=$((eq + 1)); echo "offset $s: EQUAL (3 problems)"
  else ne=$((ne + 1)); echo "offset $s: DIFFER or failed"; fi
done | tee "$out/sweep.txt"
cat "$out"/h_base_1.txt
echo "done in $(($(date +%s) - S)) s"
