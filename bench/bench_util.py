"""Timing, error and report helpers shared by the Python benches that run on the GPU machine."""

from __future__ import annotations

import json
import statistics

import torch


def median_ms(fn, warmup: int = 3, reps: int = 20) -> float:
    """The median of `reps` single calls, each between two CUDA events, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def times_ms(fn, warmup: int, reps: int) -> tuple[float, float]:
    """(median of single timed calls, mean of `reps` calls back to back): the first includes
    what the host's launches leave the GPU idle at each call's start; the second hides that
    behind the GPU's queue, as a training step's stream of work does."""
    median = median_ms(fn, warmup, reps)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return median, start.elapsed_time(stop) / reps


def rel_l2(actual: torch.Tensor, exact: torch.Tensor) -> float:
    """||actual - exact|| / ||exact|| in FP64 (||actual|| when exact is zero)."""
    a, e = actual.to(torch.float64), exact.to(torch.float64)
    den = torch.linalg.vector_norm(e).item()
    num = torch.linalg.vector_norm(a - e).item()
    return num / den if den > 0 else num


def print_errors(errors: dict, limits: dict, width: int = 15) -> None:
    """One line an output: its rel-L2 and, where SPEC gives a limit, whether it is met."""
    for name, e in errors.items():
        limit = limits.get(name)
        verdict = "" if limit is None else (
            f"(limit {limit:.0e}) ok" if e <= limit
            else f"(limit {limit:.0e}) MISSES SPEC by {e / limit:.1f}x")
        print(f"  {name:{width}s} rel-L2 {e:.2e}  {verdict}", flush=True)


def write_rows(path: str | None, rows: list) -> None:
    """The rows so far as JSON (rewritten after each case, so a call cut short keeps them)."""
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)
