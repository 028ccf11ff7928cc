#!/usr/bin/env bash
# Call check101 (forty-first session): the mHC GPU suite, the hash test and the four sanitizers on
# main's kernels of fc13df8 (the CpIndex refactor, after the fortieth session's final build), from
# mhc100's carry (its "base" variant is git:fc13df8). The full final build did not fit: two calls
# for it were taken back by the device pool before they finished (~570 s of the session's 1800).
# Device call: {"command": "bash bench/results/raw-2026-12-02-s41/check101/run.sh", "carry": [".carry/mhc100x"]}
ROUNDS=1 HIDE='^$' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc100 "base" "base" 0 4096,16384 \
  'MhcFwdCluster' 2>&1 |
  grep -E "forward_|backward_|prepare\+|copy|PASSED|FAILED|SUMMARY|hashes|Duration|rc=|ERROR|error|hazard"
