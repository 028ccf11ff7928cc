#!/usr/bin/env bash
# Runs ON the GPU machine (device tool), from the repo root: issue 6's H200 test. Starts the
# daemon with --backend=cuda on a temporary socket, runs tests/gpu/python/two_trainers.py (two
# trainer processes, STEPS optimizer steps each, gradients checked every step, no regions left
# when they exit), checks the expandable-segments error, stops the daemon (SIGTERM).
#
# Needs there: the daemon binary built here with its libraries beside it (CAKEGRAD_DAEMON,
# default build/server/cakegradd) and the generated Python protobuf code
# client/python/cakegrad/v1/ (run client/python/generate_proto.sh here first; it is
# git-ignored, so name both in the device tool's `carry`). The GPU machine's python3 has
# torch, numpy, grpcio and protobuf; nothing is installed.
#   bash tools/gpu/run_python_gpu.sh            STEPS=20 by default; logs under $OUT
# GPUS=split gives each trainer its own GPU (two_trainers.py --gpus); the daemon sees the GPUs
# of this environment's CUDA_VISIBLE_DEVICES. BUSY_BENCH=1 then measures every GPU's busy
# fraction with cakegrad_daemon_bench busy (clients spread over the GPUs; CAKEGRAD_BENCH).
set -uo pipefail
OUT=${OUT:-/tmp/cakegrad-out}
STEPS=${STEPS:-20}
GPUS=${GPUS:-same}
DAEMON=${CAKEGRAD_DAEMON:-build/server/cakegradd}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/client/python:$PWD/tests/python${PYTHONPATH:+:$PYTHONPATH}"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD \
    2>/dev/null || echo ' (with uncommitted changes)')"
  echo "command: bash tools/gpu/run_python_gpu.sh (STEPS=$STEPS GPUS=$GPUS" \
    "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset})"
  nvidia-smi --query-gpu=index,uuid,name,driver_version --format=csv,noheader
  python3 -c 'import torch, grpc, google.protobuf as pb, numpy
print(f"torch {torch.__version__} grpcio {grpc.__version__} protobuf {pb.__version__}")'
} | tee "$OUT/env_python.txt"

if [ ! -f client/python/cakegrad/v1/service_pb2.py ]; then
  echo "missing client/python/cakegrad/v1: run client/python/generate_proto.sh on the" \
       "development machine and carry client/python/cakegrad/v1" >&2
  exit 1
fi
if [ ! -x "$DAEMON" ]; then
  echo "missing daemon binary $DAEMON (carry the build with its lib/)" >&2
  exit 1
fi

sockdir=$(mktemp -d /tmp/cakegrad-gpu-XXXXXX)
sock="$sockdir/cakegrad.sock"
"$DAEMON" --socket="$sock" --backend=cuda > "$OUT/daemon_python.log" 2>&1 &
daemon_pid=$!
stop_daemon() {
  kill -TERM "$daemon_pid" 2> /dev/null && wait "$daemon_pid"
  echo "daemon exited with $?"
}
for _ in $(seq 600); do
  [ -S "$sock" ] && break
  if ! kill -0 "$daemon_pid" 2> /dev/null; then
    echo "daemon died at start:"
    tail -30 "$OUT/daemon_python.log"
    exit 1
  fi
  sleep 0.1
done
[ -S "$sock" ] || { echo "daemon did not listen on $sock within 60 s"; stop_daemon; exit 1; }
# It refuses sessions (UNAVAILABLE) until contexts, workspaces and warm-up are done.
python3 -c "import cakegrad; cakegrad.Client('unix:$sock', connect_timeout=180).close()" \
  || { echo "daemon did not open a session within 180 s"; stop_daemon; exit 1; }

rc=0
python3 tests/gpu/python/two_trainers.py --address "unix:$sock" --steps "$STEPS" --out "$OUT" \
  --gpus "$GPUS" 2>&1 | tee "$OUT/two_trainers.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
if [ "${BUSY_BENCH:-0}" = 1 ]; then
  timeout 120 "${CAKEGRAD_BENCH:-build/bench/cakegrad_daemon_bench}" --address="unix://$sock" \
    busy --clients="${BUSY_CLIENTS:-2,8}" --seconds=5 2>&1 | tee "$OUT/busy.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi

# The nn modules bring their own workspaces: shapes beyond the daemon's default one train.
timeout 300 python3 tests/gpu/python/module_workspaces.py --address "unix:$sock" 2>&1 \
  | tee "$OUT/module_workspaces.txt"
grep -q "MODULE_WORKSPACES PASSED" "$OUT/module_workspaces.txt" || rc=1

# Expandable-segment memory cannot go through legacy CUDA IPC: the package must say what to change.
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 - "unix:$sock" <<'PY' 2>&1 \
  | tee "$OUT/expandable_segments.txt"
import sys, torch, cakegrad
from cakegrad.cake_causal_conv1d_train import cake_causal_conv1d_train_forward
cakegrad.connect(sys.argv[1])
x = torch.zeros(8, 16, dtype=torch.bfloat16, device="cuda")
try:
    cake_causal_conv1d_train_forward(x, torch.zeros(16, 4, device="cuda"), [0, 8])
    print("EXPANDABLE_SEGMENTS FAILED: no error")
except cakegrad.FailedPreconditionError as e:
    ok = "expandable_segments" in str(e)
    print(f"EXPANDABLE_SEGMENTS {'PASSED' if ok else 'FAILED'}: {e}")
PY
grep -q "EXPANDABLE_SEGMENTS PASSED" "$OUT/expandable_segments.txt" || rc=1

stop_daemon
rm -rf "$sockdir"
exit $rc
