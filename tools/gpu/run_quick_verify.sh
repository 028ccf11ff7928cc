#!/usr/bin/env bash
# A short device call for a build whose kernels changed after the last full run_all_gpu.sh, when
# device time is short: the daemon suite and the mHC and KDA suites at once (correctness only),
# then the mHC bench and the KDA forward bench alone on the GPU. Binaries from
# tools/gpu/package_for_gpu.sh (carry [".carry/gpu.tar.xz"]); summary and logs in $OUT.
# Written 2026-11-30 for a0be671's build; the device refused that call (budget spent), so it has
# not run on the device yet.
set -uo pipefail
OUT=${OUT:-/tmp/out}
L=$OUT/l
mkdir -p "$L"
if [ ! -d .carry/gpu ] && [ -f .carry/gpu.tar.xz ]; then tar xJf .carry/gpu.tar.xz; fi
B=$PWD/.carry/gpu/bin
export CAKEGRAD_DAEMON=$B/cakegradd PATH=$PATH:/usr/local/cuda/bin
S=$OUT/summary.txt
{ date -u; cat .carry/gpu/SOURCE 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$S"
timeout 90 "$B/cakegrad_gpu_daemon_tests" > "$L/daemon.log" 2>&1 & d=$!
timeout 90 "$B/cakegrad_gpu_mhc_tests" > "$L/mhc_tests.log" 2>&1 & m=$!
timeout 110 "$B/cakegrad_gpu_kda_tests" > "$L/kda_tests.log" 2>&1 & k=$!
wait $d; echo "daemon rc=$?" >> "$S"
wait $m; echo "mhc tests rc=$?" >> "$S"
wait $k; echo "kda tests rc=$?" >> "$S"
grep -h "PASSED\|FAILED\|kda hashes" "$L"/*.log >> "$S"
timeout 30 "$B/cakegrad_mhc_bench" > "$L/bench_mhc.txt" 2>&1; echo "mhc bench rc=$?" >> "$S"
KDA_BENCH_FWD_ONLY=1 timeout 25 "$B/cakegrad_kda_bench" > "$L/bench_kda_fwd.txt" 2>&1
echo "kda fwd bench rc=$?" >> "$S"
cat "$L/bench_mhc.txt" "$L/bench_kda_fwd.txt" >> "$S"
tar czf "$OUT/logs.tgz" -C "$OUT" l && rm -rf "$L"
cat "$S"
