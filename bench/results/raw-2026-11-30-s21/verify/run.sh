#!/usr/bin/env bash
# The twenty-first session's last call: auto's threshold moved from 2 heads to 4 (host code and
# test lists only; kernels as in the final build, 97bee1e). The daemon's cuda-backend tests, the
# KDA GPU tests and the KDA bench (its default line) on the new binaries.
# Device call: {"command": "bash bench/results/raw-2026-11-30-s21/verify/run.sh",
#   "carry": [".carry/gpu.tar.xz", "client/python/cakegrad/v1"], "timeout_s": 400}
set -uo pipefail
tar xJf .carry/gpu.tar.xz
FAMILIES=kda TORCH_REF=0 SKIP="3 5 6 7" timeout 380 bash tools/gpu/run_all_gpu.sh
