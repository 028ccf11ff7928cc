#!/usr/bin/env bash
# Run here (the development machine) before a device call: copies what the GPU machine lacks
# into .carry/ (ignored by git; name it in the device tool's `carry`). The GPU machine has
# nvcc, cmake and ninja but no GoogleTest, so its sources travel.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mkdir -p .carry
if [ ! -d .carry/googletest ]; then
  cp -r /usr/src/googletest .carry/googletest
fi
echo "carry ready: $(du -sh .carry | cut -f1)"
