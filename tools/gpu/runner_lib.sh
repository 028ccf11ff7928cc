# Sourced by the GPU runners (run_all_gpu.sh, run_multi_gpu.sh) after they set LOG: the carried
# binaries, the summary that comes back in $OUT, and the helpers every stage uses.
OUT=${OUT:-/tmp/cakegrad-out}
mkdir -p "$OUT" "$LOG"
# The device tool carries at most 64 MiB with the tracked tree, which the packed binaries alone
# nearly fill: package_for_gpu.sh also writes them as .carry/gpu.tar.xz, unpacked here when only
# the archive came.
if [ ! -d .carry/gpu ] && [ -f .carry/gpu.tar.xz ]; then tar xJf .carry/gpu.tar.xz; fi
bin="$PWD/.carry/gpu/bin"
export CAKEGRAD_DAEMON="$bin/cakegradd"
summary="$OUT/summary.txt"
: > "$summary"
# A line for the summary; the logs are re-packed each time, so a run cut short by the device
# tool's limit still returns what finished.
note() {
  echo "$*" | tee -a "$summary"
  tar czf "$OUT/logs.tgz" -C "$LOG" . 2>/dev/null
}
skip() { [[ " ${SKIP:-} " == *" $1 "* ]]; }
gtest_line() { grep -E "^\[  (PASSED|FAILED)  \]|tests? ran" "$1" | tr '\n' ' '; }
