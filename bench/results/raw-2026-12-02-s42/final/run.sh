#!/usr/bin/env bash
# The forty-second session's final build of bb66b62 (mHC's SASS identical to fc13df8's, which
# check101 ran; conv1d and KDA as 991ae9b's final build): every family's suite, the daemon, Python,
# the benches and the four sanitizers. KDA's kernels are unchanged since 0e44c86, so no ncu cases.
# Carry: [".carry/fb-base", "client/python/cakegrad/v1"]; .carry/fb-base/gpu.tar.xz is
# `ninja -C build && bash tools/gpu/package_for_gpu.sh` at bb66b62, moved aside so that a
# candidate's package could sit beside it; it is copied to where final_build_call.sh unpacks it.
cp .carry/fb-base/gpu.tar.xz .carry/gpu.tar.xz && NCU_CASES= bash tools/gpu/final_build_call.sh
