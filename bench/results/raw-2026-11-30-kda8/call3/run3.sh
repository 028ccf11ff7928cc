#!/usr/bin/env bash
# kda8 call 3: full bench (forward, sequential and chunked backward) of c3 (kda-s8) and main, then
# more KDA_BENCH_FWD_ONLY=1 reps alternating while time is left.
set -uo pipefail
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
O=$(mktemp -d)
pack() { tar czf "$FINAL/logs.tgz" -C "$O" .; }
D=.carry/kda8
LIMIT=${LIMIT:-88}
START=$(date +%s)
el() { echo $(($(date +%s) - START)); }
left() { echo $((LIMIT - $(el))); }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$O/env.txt"
timeout 10 $D/copybw | tee "$O/copy.txt"
for b in c3 main; do
  [ "$(left)" -gt 30 ] || break
  timeout $(($(left) - 3)) $D/${b}_bench >"$O/full_$b.txt" 2>&1
  echo "full $b rc=$? at $(el) s"
  grep -E "median|vs sequential" "$O/full_$b.txt"
  pack
done
for r in 4 5 6; do
  for b in main c3; do
    [ "$(left)" -gt 6 ] || break 2
    KDA_BENCH_FWD_ONLY=1 timeout $(($(left) - 1)) $D/${b}_bench >"$O/fwd_${b}_$r.txt" 2>&1
    echo "fwd $b rep $r rc=$? at $(el) s: $(grep -o 'median *[0-9.]* ms' "$O/fwd_${b}_$r.txt" | awk '{print $2}' | tr '\n' ' ')"
  done
done
pack
echo "== done at $(el) s"
