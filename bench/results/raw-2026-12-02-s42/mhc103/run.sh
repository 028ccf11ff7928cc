#!/usr/bin/env bash
# Call mhc103 as run in the forty-second session (prepared and described in the forty-first:
# bench/results/raw-2026-12-02-s41/mhc103-ready/run.sh, whose header has the build). Sent in one
# device call together with mhc104:
#   {"command": "bash bench/results/raw-2026-12-02-s41/mhc103-ready/run.sh; echo \"=== mhc104\";
#     bash bench/results/raw-2026-12-02-s42/mhc104/run.sh",
#    "carry": [".carry/mhc103x", ".carry/mhc104x"], "timeout_s": 320}
# The carry was built here from a worktree of fc13df8 with mhc103-ready/mbar3b.diff applied
# (branch mhc-mbar3b); out/mhc103.tgz is what came back.
bash bench/results/raw-2026-12-02-s41/mhc103-ready/run.sh
