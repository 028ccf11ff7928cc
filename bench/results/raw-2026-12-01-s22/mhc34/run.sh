#!/usr/bin/env bash
# mhc34 (twenty-second session): backward_finish's token kernel converts each BF16 x BF16 product
# of dpre = sum_c dU X to FP64 before adding it (16384 conversions a token, ~64 us of the H200's
# 16-a-cycle conversion rate at T = 16384 spread over 132 SMs, against a 209 us kernel). p8 sums
# each lane's 8 products of a load in FP32 first (exact products, 7 roundings), then converts and
# adds in FP64: 8x fewer conversions and FP64 adds. New bits (dpre); the suite (accuracy and the
# dscale cancellation cases) and both sanitizers on p8. 3 alternating rounds at T = 4096, 16384.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc34
ab_mhc_bench $D "base p8" p8 4096,16384 "forward_\|backward_prepare\|prepare+finish"
grep "cancellation" "$AB_OUT/ab/tests_p8.log"
ab_pack; echo "== done at $(ab_el) s"
