#!/usr/bin/env bash
# Lead, tenth session: the final build's mHC racecheck reported 1 hazard (MhcKernels.SanitizeSmall:
# a stage-0 X read of the stats cluster kernel against its mbarrier init), where helper mhc18's
# Release build of the same kernels reported none. Racecheck twice on each of: the final build
# (RelWithDebInfo, .carry/gpu.tar.xz), a Release kernels-only build of the same commit (rel) and
# mhc18's c1 (Release); full hazard reports. Then the KDA *Sanitize* test the final call's 90 s
# racecheck limit cut off (SanitizeChunkedBackward*).
# run: {"command": "bash .carry/lead10/run.sh", "carry": [".carry/lead10", ".carry/gpu.tar.xz"]}
set -u
export PATH=$PATH:/usr/local/cuda/bin
[ -d .carry/gpu ] || tar xJf .carry/gpu.tar.xz
L=${OUT:-/tmp/out}/l
mkdir -p "$L"
date -u +%FT%TZ | tee "$L/summary.txt"
cat .carry/gpu/SOURCE >> "$L/summary.txt"
for i in 1 2; do
  for v in full rel c1; do
    b=.carry/lead10/$v/cakegrad_gpu_mhc_tests
    [ $v = full ] && b=.carry/gpu/bin/cakegrad_gpu_mhc_tests
    timeout 60 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 40 \
      --error-exitcode 9 "$b" --gtest_filter='MhcKernels.SanitizeSmall' > "$L/race_${v}_$i.log" 2>&1
    echo "mhc $v run $i: rc=$? $(grep 'RACECHECK SUMMARY' "$L/race_${v}_$i.log")" | tee -a "$L/summary.txt"
  done
done
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
  .carry/gpu/bin/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.SanitizeChunkedBackward*' \
  > "$L/race_kda_chunked.log" 2>&1
echo "kda SanitizeChunkedBackward* racecheck: rc=$? $(grep -E 'OK \]|RACECHECK SUMMARY' "$L/race_kda_chunked.log" | tr '\n' ' ')" | tee -a "$L/summary.txt"
tar czf "${OUT:-/tmp/out}/lead10.tgz" -C "$L" .
