"""bench/kda_public_bench.py's FP64 reference (checkpointed segments on the GPU) against the
tests' own FP64 KDA oracle, so that the accuracy it reports for the public Triton kernels is
measured against the right function. CPU only; the public kernels themselves run on the GPU."""

from __future__ import annotations

import importlib.util
import os

from conftest import REPO


def test_segmented_fp64_reference_matches_the_oracle(capsys):
    path = os.path.join(REPO, "bench", "kda_public_bench.py")
    spec = importlib.util.spec_from_file_location("kda_public_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rc = bench.self_check()
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "worst rel-L2" in out
