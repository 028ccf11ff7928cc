#!/usr/bin/env bash
# Device call for the chunked KDA backward (branch kda-chunked-backward). Binaries built on the
# development machine (nvcc 13.0, sm_90a, Release) and carried; SOURCE names the commit.
# Usage (device tool, carry [".carry/kda-bwd"]): bash .carry/kda-bwd/run.sh STEPS
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
D=.carry/kda-bwd
START=$(date +%s)
left() { echo $(( ${BUDGET:-400} - ($(date +%s) - START) )); }
step() {  # step NAME TIMEOUT CMD...: runs CMD under timeout if enough time is left, log in $OUT
  local name=$1 to=$2; shift 2
  if [ "$(left)" -lt 15 ]; then echo "== $name: SKIPPED (time)"; return; fi
  [ "$to" -gt "$(left)" ] && to=$(left)
  echo "== $name (timeout $to s): $*"
  local t0=$(date +%s)
  timeout "$to" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "== $name rc=$rc $(( $(date +%s) - t0 )) s"
  grep -E "^\[  (FAILED|PASSED) |^\[  FAILED  \]|Failure|ERROR SUMMARY|RACECHECK SUMMARY|error:" "$OUT/$name.log" | head -40
}
{ date -u +%FT%TZ; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; }
source $D/steps.sh  # here: call1_steps.sh, call2_steps.sh (call 1 also tee-d the header to env.txt)
