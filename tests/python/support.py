"""Test helpers: the placements a host-backend argument can have, SPEC's tolerances."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import cakegrad
from torch_reference import f64, rel_l2

# How a test hands its arrays to the package: ordinary CPU tensors (copied into shared
# memory by each call), CPU tensors already in shared memory, and the same for numpy.
PLACEMENTS = ["torch", "torch_shared", "numpy", "numpy_shared"]

# SPEC section 0 defaults.
BF16_TOL = 4e-3
FP32_TOL = 1e-5


def _ml_dtypes():
    return pytest.importorskip("ml_dtypes", reason="numpy bfloat16 arrays need ml_dtypes")


def to_numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(_ml_dtypes().bfloat16)
    return t.numpy().copy()


def place(t, placement: str):
    """t (a CPU tensor, or None) as the placement says."""
    if t is None:
        return None
    if placement == "torch":
        return t.clone()
    if placement == "torch_shared":
        return cakegrad.to_shared(t)
    if placement == "numpy":
        return to_numpy(t)
    if placement == "numpy_shared":
        return cakegrad.to_shared(to_numpy(t))
    raise ValueError(placement)


def check_kind(out, placement: str) -> None:
    """Outputs the package allocated are of the primary input's kind, in shared memory."""
    if placement.startswith("numpy"):
        assert isinstance(out, np.ndarray), type(out)
    else:
        assert isinstance(out, torch.Tensor), type(out)
    assert cakegrad.is_shared(out)


def assert_close(name: str, actual, exact, tol: float) -> None:
    err = rel_l2(actual, exact)
    assert err <= tol, f"{name}: rel-L2 {err:.3g} > {tol:g}"
    assert torch.isfinite(f64(actual)).all(), f"{name}: NaN/Inf"


def bf16_ulp(x: torch.Tensor) -> torch.Tensor:
    """The spacing of BF16 numbers at |x| (8 significant bits)."""
    a = x.abs().clamp(min=2.0 ** -126)
    return torch.pow(2.0, torch.floor(torch.log2(a)) - 7)


def rand_bf16(*shape, scale=1.0, generator=None) -> torch.Tensor:
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(
        torch.bfloat16)
