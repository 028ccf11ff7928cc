#!/usr/bin/env bash
# mhc78 (thirty-fourth session): each stage slot refilled by the last warp done with it (a shared
# atomic count, acq_rel at CTA scope, then fence.proxy.async and the tensor copies), so that no
# block barrier waits for the slot: on main's column kernel (la: no barrier in the loop at all;
# la.diff) and on dbuf (dbla: the one barrier left is the dxmap handoff; dbla_vs_dbuf.diff).
# Build here:
#   bash tools/gpu/build_ab_carry.sh mhc78 mhc "kernels/cuda/mhc_backward.cu kernels/cuda/mhc_common.cuh" \
#     base=git:main la=git:mhc-col-la dbuf=git:mhc-col-dbuf dbla=git:mhc-col-dbla
# Device call: {"command": "bash bench/results/raw-2026-12-01-s34/mhc78/run.sh",
#   "carry": [".carry/mhc78x"], "timeout_s": 480}
exec bash tools/gpu/mhc_ab_call.sh mhc78 "base la dbuf dbla" "la dbla"
