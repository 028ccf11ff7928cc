#!/usr/bin/env bash
# kda71 (twenty-fourth session): the tensor maps without L2 promotion (mhc45's p0) for KDA: the
# chunked forward's state pass and the backward's reverse chain copy the records' -W | Q Gam and
# Kdec^T | M tiles (128-byte rows) by TMA. base = main, p0 = kernels/cuda/tensor_map.h with
# CU_TENSOR_MAP_L2_PROMOTION_NONE. Same bits expected (hash gate), 3 alternating rounds of the
# forward and the chunked backward, the suite and both sanitizers on p0.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call kda71
ab_kda_gate $D "base p0" 3
ab_pack; echo "== done at $(ab_el) s"
