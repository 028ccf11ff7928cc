#!/usr/bin/env bash
# Forty-first session's one device call for two jobs, the device being scarce this session (each
# failed start cost ~100 s of the 1800): (1) the final build of main's kernels, fc13df8 (the
# stages of tools/gpu/final_build_call.sh without its KDA ncu cases: KDA is unchanged since 0e44c86),
# (2) the A/B of forward_prepare's exchange candidates, mhc100 (its run.sh says what they are),
# timing and hash gate only (the suite and the sanitizers on a candidate come in a later call if
# it is merged).
# Carry: [".carry/gpu.tar.xz" (package_for_gpu.sh on fc13df8), "client/python/cakegrad/v1",
#         ".carry/mhc100x"]
# As sent (twice) this script spelled out final_build_call.sh's stage lines (the same arguments,
# run_all_gpu.sh under `timeout 430` rather than 480); they are now that script with NCU_CASES
# empty, so that the stages live in one place.
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
NCU_CASES= bash tools/gpu/final_build_call.sh
ROUNDS=3 HIDE='backward_\|forward_finish' NCU_CLOCKS=none timeout 140 bash tools/gpu/mhc_ab_call.sh \
  mhc100 "base mbar v4 mbar_v4" "" 0 4096,16384 'MhcFwdCluster' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|DRAM|rc=|ERROR|error|hazard"
echo "== done at $(el) s"
