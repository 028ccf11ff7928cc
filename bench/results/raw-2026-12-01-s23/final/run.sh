#!/usr/bin/env bash
# The twenty-third session's final-build call, as it ran on the device (wall 283 s):
#   {"command": "SANITIZE_FAMILIES=mhc bash tools/gpu/final_build_call.sh",
#    "carry": [".carry/gpu.tar.xz", "client/python/cakegrad/v1"], "timeout_s": 560}
# tools/gpu/final_build_call.sh as of commit 0f7bb08; .carry/gpu.tar.xz from
# `ninja -C build && bash tools/gpu/package_for_gpu.sh` on commit 6e4e4c0.
SANITIZE_FAMILIES=mhc exec bash tools/gpu/final_build_call.sh
