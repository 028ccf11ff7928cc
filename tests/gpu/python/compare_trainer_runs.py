"""Issue 9 item 3: two runs of two_trainers.py, bit for bit.

    python tests/gpu/python/compare_trainer_runs.py SPLIT_DIR SINGLE_DIR

SPLIT_DIR: the run with each trainer on its own GPU (--gpus split, one daemon for both GPUs);
SINGLE_DIR: the same trainers (same seeds, same steps) against a daemon that sees one GPU.
Every digest of every step of every rank must be equal: the daemon's outputs of all operators
and every gradient. Also prints on which GPU each rank ran and for how long the two trainers
of the split run were running at the same time.
"""

from __future__ import annotations

import json
import os
import sys


def load(directory: str, rank: int) -> list[dict]:
    with open(os.path.join(directory, f"trainer{rank}.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    split_dir, single_dir = sys.argv[1:]
    ok = True
    runs = {}
    for rank in (0, 1):
        a, b = load(split_dir, rank), load(single_dir, rank)
        runs[rank] = a
        if not a or len(a) != len(b):
            print(f"rank {rank}: {len(a)} steps in the split run, {len(b)} in the single-GPU run")
            ok = False
            continue
        print(f"rank {rank}: split run on {a[0]['gpu']}, single-GPU run on {b[0]['gpu']}")
        differing = []
        compared = 0
        for x, y in zip(a, b):
            keys = sorted(set(x["digests"]) | set(y["digests"]))
            for key in keys:
                compared += 1
                if x["digests"].get(key) != y["digests"].get(key):
                    differing.append(f"step {x['step']} {key}")
        print(f"rank {rank}: {compared} digests over {len(a)} steps, {len(differing)} differ"
              + (": " + ", ".join(differing[:10]) if differing else ""))
        ok &= not differing
    if runs.get(0) and runs.get(1):
        gpus = {runs[0][0]["gpu"], runs[1][0]["gpu"]}
        if len(gpus) != 2:
            print(f"the split run's trainers did not use two GPUs: {gpus}")
            ok = False
        start = max(runs[0][0]["t_start"], runs[1][0]["t_start"])
        end = min(runs[0][-1]["t_end"], runs[1][-1]["t_end"])
        total = max(runs[0][-1]["t_end"], runs[1][-1]["t_end"]) - min(
            runs[0][0]["t_start"], runs[1][0]["t_start"])
        print(f"split run: the two trainers ran at the same time for {max(0.0, end - start):.1f} s"
              f" of {total:.1f} s")
    print("MULTI_GPU_BITWISE " + ("PASSED" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
