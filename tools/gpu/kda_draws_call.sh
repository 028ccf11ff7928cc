#!/usr/bin/env bash
# Runs ON the GPU machine: many fresh draws of the KDA accuracy tests that FILTER selects (seeds
# SEED_BASE, SEED_BASE + 1, ...: rerun one with KDA_TEST_SEED), and the distribution of one
# output's rel-L2 per backward ("kda chunked bwd", "kda sequential bwd" with PAIR=1, ...): how
# often a draw misses its limit, and the worst draw's seed. For ill-conditioned outputs (dA_log at
# few heads) whose tail a suite run meets only now and then. tools/gpu/ab_extras.sh's
# ab_dalog_tail runs it on an A/B carry's variant.
#   bash tools/gpu/kda_draws_call.sh TEST_BINARY FILTER DRAWS [SEED_BASE=1] [OUTPUT=dA_log]
# Environment: PAIR=1 (the sequential backward on each draw too), LIMIT_S (default 240): the
# draws stop there and the summary covers those done. Logs under $OUT/draws/.
set -uo pipefail
[ $# -ge 3 ] || { sed -n 2,9p "$0" >&2; exit 2; }
bin=$1 filter=$2 draws=$3 seed_base=${4:-1} output=${5:-dA_log}
out=${OUT:-/tmp/cakegrad-out}/draws
mkdir -p "$out"
# Named by binary, filter and first seed: runs of one test on other seeds may go side by side.
log=$out/$(basename "$(dirname "$bin")")_$(echo "$filter" | tr -c 'A-Za-z0-9_\n' _)_$seed_base.log
pair=()
[ "${PAIR:-0}" = 1 ] && pair=(KDA_PAIR_SEQUENTIAL=1)
env "${pair[@]}" KDA_TEST_SEED_BASE="$seed_base" timeout "${LIMIT_S:-240}" "$bin" \
  --gtest_filter="$filter" --gtest_repeat="$draws" > "$log" 2>&1
echo "$bin $filter: rc=$? ($(grep -c '^\[ seed \]' "$log") draws) log $log"
# One line per draw and backward: tag|shape|rel-L2|limit|seed, sorted by tag, shape and rel-L2.
awk '/^\[ seed \]/ { split($4, kv, "="); seed = kv[2]; next } { print seed "|" $0 }' "$log" |
  grep -E "^[0-9]*\|\[ [a-z ]+ \] .* $output +rel-L2" |
  sed -E 's/^([0-9]*)\|\[ ([a-z ]+) \] ([^ ]+) .*rel-L2 ([0-9.e+-]+) \(limit ([0-9.e+-]+)\).*/\2|\3|\4|\5|\1/' |
  sort -t'|' -k1,2 -k3g |
  awk -F'|' -v o="$output" '
    function flush() {
      if (n == 0) return
      p = int(0.9 * n + 0.5)
      if (p < 1) p = 1
      printf "%s %s %s: %d draws, median %.3e, p90 %.3e, max %.3e (KDA_TEST_SEED=%s), over %s: %d\n",
             tag, shape, o, n, v[int((n + 1) / 2)], v[p], v[n], worst, lim, over
    }
    { key = $1 "|" $2
      if (key != last) { flush(); n = 0; over = 0; last = key; tag = $1; shape = $2; lim = $4 }
      v[++n] = $3; worst = $5; if ($3 + 0 > $4 + 0) ++over }
    END { flush() }'
