#!/usr/bin/env bash
# Runs ON the GPU machine, from the repo root, everything GPU-side in one call, from binaries
# packed here by tools/gpu/package_for_gpu.sh (carry: .carry/gpu.tar.xz and
# client/python/cakegrad/v1):
#   1. the daemon's cuda backend through CUDA IPC (cakegrad_gpu_daemon_tests)
#   2. each family's GPU tests against the FP64 reference
#   4. each family's benchmark, then the PyTorch references of the same math
#   5. the Python two-trainer test (tools/gpu/run_python_gpu.sh)
#   6. the daemon's overhead and GPU busy fraction (cakegrad_daemon_bench), eager and graphs
#   7. the EVENT latency again under MPS (one context for all processes)
#   3. compute-sanitizer on each family's *Sanitize* tests, one run a tool of SANITIZE_TOOLS
#      (default: sanitize_tools.sh, all four), all at once (last: the slowest and,
#      for unchanged kernels, a repeat; ~105 s, KDA's racecheck the longest)
# Logs go to /tmp/cakegrad-gpu-logs and come back as $OUT/logs.tgz (re-packed after every stage, so a run
# cut short by the device tool's limit still returns what finished); a summary prints at the end.
# STEPS (python test), PYTHON_FIRST (below), FAMILIES (default "conv1d mhc kda"), TORCH_REF=0
# (no PyTorch references in stage 4), TORCH_FAMILIES and SANITIZE_FAMILIES (subsets of FAMILIES
# for stage 4's references and stage 3, e.g. to leave out a family whose kernels did not change)
# and SKIP (space-separated stage numbers) tune it. All
# stages take more than one device call's 10 minutes: for unchanged kernels run
# PYTHON_FIRST=1 SKIP="2 3 4"; after kernel changes, SKIP="1 5 6" (each fits one call).
set -uo pipefail
LOG=/tmp/cakegrad-gpu-logs  # outside $OUT: only the summary and one archive come back
source tools/gpu/runner_lib.sh
source tools/gpu/sanitize_tools.sh  # SANITIZE_TOOLS
{
  echo "date: $(date -u +%FT%TZ)"
  # The commit is the binaries' (SOURCE, written by package_for_gpu.sh). The device copy's own
  # .git can be older than the tree copied with it (it named be5d89d beside binaries of 184c470).
  echo "binaries: $(cat .carry/gpu/SOURCE 2>/dev/null || echo 'unknown source')"
  echo "command: bash tools/gpu/run_all_gpu.sh (SKIP='${SKIP:-}' FAMILIES='${FAMILIES:-}' PYTHON_FIRST=${PYTHON_FIRST:-0})"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
} | tee "$LOG/env.txt" >> "$summary"

# The Python stage is mostly CPU-side checking; PYTHON_FIRST=1 runs it in the background beside
# stages 1 and 2 (correctness only) and waits for it before the timed stages 4 and 6.
run_python() {
  OUT="$LOG" STEPS=${STEPS:-20} timeout 480 bash tools/gpu/run_python_gpu.sh \
    > "$LOG/python_gpu.log" 2>&1 &
  py_pid=$!
}
wait_python() {
  [ -n "${py_pid:-}" ] || return 0
  wait "$py_pid"
  note "python two trainers: rc=$? $(tail -1 "$LOG/python_gpu.log")"
  py_pid=""
}
if ! skip 5 && [ "${PYTHON_FIRST:-0}" = 1 ]; then
  run_python
fi
if ! skip 1; then
  "$bin/cakegrad_gpu_daemon_tests" > "$LOG/gpu_daemon_tests.log" 2>&1
  note "daemon (cuda backend, IPC): rc=$? $(gtest_line "$LOG/gpu_daemon_tests.log")"
fi
FAMILIES=${FAMILIES:-conv1d mhc kda}  # stages 2, 3, 4: which kernel families
if ! skip 2; then
  for f in $FAMILIES; do
    timeout 200 "$bin/cakegrad_gpu_${f}_tests" > "$LOG/gpu_${f}_tests.log" 2>&1
    note "$f GPU tests: rc=$? $(gtest_line "$LOG/gpu_${f}_tests.log")"
    grep -E "FAILED|Failure" "$LOG/gpu_${f}_tests.log" | head -5 | tee -a "$summary"
  done
fi
[ "${PYTHON_FIRST:-0}" = 1 ] && wait_python
if ! skip 4; then
  for f in $FAMILIES; do
    timeout 150 "$bin/cakegrad_${f}_bench" > "$LOG/bench_${f}.txt" 2>&1
    note "$f bench: rc=$?"
  done
  for f in ${TORCH_FAMILIES:-$FAMILIES}; do
    py=bench/${f}_torch_ref.py
    [ -f "$py" ] && [ "${TORCH_REF:-1}" = 1 ] || continue
    timeout 150 python3 "$py" > "$LOG/$(basename "$py" .py).txt" 2>&1
    note "$py: rc=$?"
  done
fi
if ! skip 5 && [ "${PYTHON_FIRST:-0}" != 1 ]; then
  run_python
  wait_python
fi
# Stages 6 and 7: a daemon of their own on $sock, up until `health` answers (10 s at most).
start_bench_daemon() {  # NAME, then extra flags; logs to $LOG/daemon_bench_NAME.log
  sock=/tmp/cakegrad-bench-$1.sock
  "$CAKEGRAD_DAEMON" --socket=$sock --backend=cuda "${@:2}" > "$LOG/daemon_bench_$1.log" 2>&1 &
  dpid=$!
  for _ in $(seq 100); do "$bin/cakegrad" health --address=unix://$sock --timeout=0.2 \
    >/dev/null 2>&1 && break; sleep 0.1; done
}
if ! skip 6; then
  for graphs in 0 64; do
    start_bench_daemon $graphs --cuda_graphs=$graphs
    {
      echo "== cuda_graphs=$graphs"
      timeout 60 "$bin/cakegrad_daemon_bench" --address=unix://$sock rpc
      timeout 60 "$bin/cakegrad_daemon_bench" --address=unix://$sock latency
      timeout 60 "$bin/cakegrad_daemon_bench" --address=unix://$sock --event latency
      timeout 120 "$bin/cakegrad_daemon_bench" --address=unix://$sock busy --clients=1,4,16 \
        --seconds=5
    } >> "$LOG/daemon_bench.txt" 2>&1
    note "daemon bench (cuda_graphs=$graphs): rc=$?"
    kill -TERM $dpid; wait $dpid
  done
fi
if ! skip 7; then
  # EVENT completion hands the GPU from the trainer's process to the daemon's and back; without
  # MPS that is a context switch each way. This stage repeats the EVENT latency under an MPS
  # control daemon of our own (pipe and log directories under /tmp, stopped afterwards; no
  # device setting is changed). Skipped with a note when MPS cannot start.
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/cakegrad-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/cakegrad-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d \
      > "$LOG/mps_start.log" 2>&1; then
    start_bench_daemon mps
    {
      echo "== MPS (nvidia-cuda-mps-control -d), cuda_graphs=0"
      timeout 60 "$bin/cakegrad_daemon_bench" --address=unix://$sock latency
      timeout 60 "$bin/cakegrad_daemon_bench" --address=unix://$sock --event latency
    } >> "$LOG/daemon_bench.txt" 2>&1
    note "daemon bench under MPS: rc=$?"
    kill -TERM $dpid; wait $dpid
    echo quit | nvidia-cuda-mps-control
  else
    note "MPS: could not start ($(tail -1 "$LOG/mps_start.log" 2>/dev/null))"
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
if ! skip 3; then
  # Every (family, tool) run at once: each is small and latency-bound, and KDA's racecheck alone
  # takes ~95 s since the 32- and 64-row Sanitize tests (H200).
  san=() pids=()
  for f in ${SANITIZE_FAMILIES:-$FAMILIES}; do
    for tool in $SANITIZE_TOOLS; do
      (s0=$(date +%s)
       timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 \
         "$bin/cakegrad_gpu_${f}_tests" --gtest_filter='*Sanitize*' \
         > "$LOG/sanitize_${f}_${tool}.log" 2>&1
       echo "rc=$? after $(($(date +%s) - s0)) s" > "$LOG/sanitize_${f}_${tool}.rc") &
      pids+=($!)
      san+=("$f $tool")
    done
  done
  [ ${#pids[@]} -eq 0 ] || wait "${pids[@]}"
  for ft in "${san[@]}"; do
    read -r f tool <<< "$ft"
    note "$f $tool: $(cat "$LOG/sanitize_${f}_${tool}.rc") $(tail -1 "$LOG/sanitize_${f}_${tool}.log")"
  done
fi
tar czf "$OUT/logs.tgz" -C "$LOG" .
cat "$summary"
