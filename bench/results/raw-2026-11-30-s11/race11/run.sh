#!/usr/bin/env bash
# NEVER RUN YET (written at the end of the tenth session, no device time left): the control for
# the mHC racecheck report of the tenth session (tests/gpu/RESULTS.md). Racecheck with
# --racecheck-report all, twice each, on MhcKernels.SanitizeSmall of
#   pre16 = Release kernels-only build of 31f09d0 (before mhc-s16: one TMA box a stage)
#   main  = Release kernels-only build of a0baeb4 (mhc-s16 + mhc-s18b: four swizzled boxes)
# If pre16 reports the same rank-0-read / other-rank-write hazards, the report predates mhc-s16
# and is the tool's (clusters + tensor copies); if pre16 is clean, look at the four-box staging.
# Rebuild: git worktree add --detach /work/wt-pre16 31f09d0; cmake -S . -B build-rel -G Ninja
#   -DCMAKE_BUILD_TYPE=Release -DCAKEGRAD_KERNELS_ONLY=ON; ninja -C build-rel cakegrad_gpu_mhc_tests
#   (and the same at a0baeb4), stripped into .carry/race11/{pre16,main}/.
# run: {"command": "bash .carry/race11/run.sh", "carry": [".carry/race11"], "timeout_s": 120}
set -u
export PATH=$PATH:/usr/local/cuda/bin
L=${OUT:-/tmp/out}/l
mkdir -p "$L"
date -u +%FT%TZ | tee "$L/summary.txt"
for i in 1 2; do
  for v in pre16 main; do
    timeout 45 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 40 \
      --error-exitcode 9 .carry/race11/$v/cakegrad_gpu_mhc_tests \
      --gtest_filter='MhcKernels.SanitizeSmall' > "$L/race_${v}_$i.log" 2>&1
    echo "mhc $v run $i: rc=$? $(grep 'RACECHECK SUMMARY' "$L/race_${v}_$i.log")" | tee -a "$L/summary.txt"
    grep -h "Read Thread" "$L/race_${v}_$i.log" | grep -oE "block rank [0-9]+" | sort | uniq -c \
      | sed "s/^/  $v $i reads by /" | tee -a "$L/summary.txt"
  done
done
tar czf "${OUT:-/tmp/out}/race11.tgz" -C "$L" .
