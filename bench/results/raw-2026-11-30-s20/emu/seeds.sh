#!/usr/bin/env bash
# usage: seeds.sh OUTDIR  (env KERNEL/FWD_KERNEL as build_kda_bwd_emu.sh)
cd /work/main
out=$1
SEEDS="2944688334 3215561008 178913231 1194480026 1651148083 783370652 809723979 396874294 3532554801 3625128829 462407848 1767843379 3403944986 1430105357 3751745137 837797554 2647715272 19200023 19200004"
REBUILD=1 OUT=$out bash tools/emu/run_kda_dalog_repeat_emu.sh 65 1 1 1 kernels 2 init > /dev/null 2>&1
for s in $SEEDS; do "$out/kda_dalog_repeat_emu" 65 1 $s 1 kernels 2 init 2>&1 | grep "^seed"; done
