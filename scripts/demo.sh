#!/usr/bin/env bash
# The README's first command: installs dependencies, builds, starts cakegradd (host backend when
# there is no GPU) on a private socket, submits a real conv1d forward + backward with the demo
# client and prints its check against the FP64 reference, then stops the daemon (SIGTERM).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
dir=$(mktemp -d /tmp/cakegrad-demo-XXXXXX)
sock="$dir/cakegrad.sock"
./build/server/cakegradd --socket="$sock" --backend="${BACKEND:-host}" > "$dir/daemon.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; echo "daemon log: $dir/daemon.log"' EXIT
for _ in $(seq 100); do
  ./build/client/cakegrad health --address="unix://$sock" --timeout=0.2 >/dev/null 2>&1 && break
  sleep 0.1
done
./build/client/cakegrad health --address="unix://$sock"
./build/client/cakegrad demo --address="unix://$sock" "$@"
