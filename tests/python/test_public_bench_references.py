"""The FP64 references of bench/kda_public_bench.py and bench/conv1d_public_bench.py (run on the
GPU beside the public Triton kernels) against the tests' own FP64 oracle, so that the accuracy
they report for those kernels is measured against the right function. CPU only."""

from __future__ import annotations

import importlib.util
import os

import pytest
from conftest import REPO


@pytest.mark.parametrize("script", ["kda_public_bench", "conv1d_public_bench"])
def test_public_bench_reference_matches_the_oracle(script, capsys):
    path = os.path.join(REPO, "bench", script + ".py")
    spec = importlib.util.spec_from_file_location(script, path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rc = bench.self_check()
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "worst rel-L2" in out
