#!/usr/bin/env bash
# mhc30 (twenty-second session): mhc29's stamps showed mhc28's group finisher (sum, coefficients
# and U in the CTA that completed a group's last k-range) taking 45-70 us a group, on the same few
# CTAs again and again. Now the side CTAs take work items from a counter: range items, whose last
# per group sums it (all threads, loads in flight), writes m and r and runs the coefficients of all
# 64 records in one interleaved pass, then raises the group's flag; then U items of 8 tokens, each
# waiting for its group's flag. Variants: weight 700 (w700), 850, 550; base is main. Bench at
# T = 4096, 8192, 16384 (3 rounds); the suite and both sanitizers on w700.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc30
ab_mhc_bench $D "base w700 w850 w550" w700 4096,8192,16384
ab_pack; echo "== done at $(ab_el) s"
