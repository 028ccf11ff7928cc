#!/usr/bin/env bash
for K in cur gk; do E=/tmp/dalog_side_$K/kda_dalog_repeat_emu
for s in 21500025 19200023 19200004 21300057; do
  for m in "kernels:" "x6_W3:EMU_EXACT_S0=records32 EMU_S0_ARITH=6 EMU_S0_ARITH_W=3" "x6_W6:EMU_EXACT_S0=records32 EMU_S0_ARITH=6 EMU_S0_ARITH_W=6" "exactS0:EMU_EXACT_S0=1"; do
    tag=${m%%:*}; envs=${m#*:}
    printf "%-4s %-8s " $K $tag; env $envs $E 65 1 $s 1 kernels 2 init 2>&1 | grep ^seed | cut -c1-48
  done
done; done
