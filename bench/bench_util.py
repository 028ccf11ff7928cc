"""Timing and error helpers shared by the Python benches that run on the GPU machine."""

from __future__ import annotations

import statistics

import torch


def times_ms(fn, warmup: int, reps: int) -> tuple[float, float]:
    """(median of single timed calls, mean of `reps` calls back to back): the first includes
    what the host's launches leave the GPU idle at each call's start; the second hides that
    behind the GPU's queue, as a training step's stream of work does."""
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
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return statistics.median(times), start.elapsed_time(stop) / reps


def rel_l2(actual: torch.Tensor, exact: torch.Tensor) -> float:
    """||actual - exact|| / ||exact|| in FP64 (||actual|| when exact is zero)."""
    a, e = actual.to(torch.float64), exact.to(torch.float64)
    den = torch.linalg.vector_norm(e).item()
    num = torch.linalg.vector_norm(a - e).item()
    return num / den if den > 0 else num
