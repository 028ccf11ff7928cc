#!/usr/bin/env bash
# mhc25 (twenty-second session): mhc24's side SMs with the side stats kernel over more k-ranges
# (shorter CTAs: mhc24's 4 ranges lost 35% at T = 4096). s4 = mhc24's w750 (4 ranges, weight
# 750), s8 (8 ranges, 750), s16 (16 ranges, 750), s16w (16 ranges, 1000); base is main. Bench at
# T = 4096, 8192, 16384; the suite and both sanitizers on s16.
# (Rewritten after the call onto tools/gpu/ab_extras.sh's ab_mhc_bench: the same bench and
# checks; the call printed all of ab_stdout.txt.)
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc25
ab_mhc_bench $D "base s4 s8 s16 s16w" s16 4096,8192,16384
ab_pack; echo "== done at $(ab_el) s"
