#!/usr/bin/env bash
# Final build of the forty-third session: main at 774c779 (the mHC coefficient kernel's two-lane
# Sinkhorn and forward_prepare's programmatic coefficient launch), binaries built here and packed
# by `ninja -C build && bash tools/gpu/package_for_gpu.sh`. Every suite, the daemon, Python and
# the benches; sanitizers on mHC (the only family whose kernels changed); no KDA ncu cases (KDA's
# kernels are 0e44c86's).
# Device call: {"command": "bash bench/results/raw-2026-12-02-s43/final/run.sh",
#   "carry": [".carry/gpu.tar.xz", "client/python/cakegrad/v1"], "timeout_s": 560}
SANITIZE_FAMILIES=mhc NCU_CASES= bash tools/gpu/final_build_call.sh
