#!/usr/bin/env bash
# Forty-first session's one device call for two jobs, the device being scarce this session (each
# failed start cost ~100 s of the 1800): (1) the final build of main's kernels, fc13df8 (the
# stages of tools/gpu/final_build_call.sh without its KDA ncu cases: KDA is unchanged since 0e44c86),
# (2) the A/B of forward_prepare's exchange candidates, mhc100 (its run.sh says what they are),
# timing and hash gate only (the suite and the sanitizers on a candidate come in a later call if
# it is merged).
# Carry: [".carry/gpu.tar.xz" (package_for_gpu.sh on fc13df8), "client/python/cakegrad/v1",
#         ".carry/mhc100x"]
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
tar xJf .carry/gpu.tar.xz
OUT=${OUT:-/tmp/out}
PYTHON_FIRST=1 STEPS=5 SKIP="6 7" FAMILIES="conv1d mhc kda" TORCH_FAMILIES=mhc \
  SANITIZE_FAMILIES="conv1d mhc kda" timeout 430 bash tools/gpu/run_all_gpu.sh
echo "== run_all rc=$? at $(el) s"
ROUNDS=3 HIDE='backward_\|forward_finish' NCU_CLOCKS=none timeout 140 bash tools/gpu/mhc_ab_call.sh \
  mhc100 "base mbar v4 mbar_v4" "" 0 4096,16384 'MhcFwdCluster' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|DRAM|rc=|ERROR|error|hazard"
echo "== done at $(el) s"
