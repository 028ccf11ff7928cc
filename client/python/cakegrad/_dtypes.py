"""Element types: the wire's DType, torch dtypes and numpy dtypes (bfloat16 through
ml_dtypes), and how to tell what kind of array an argument is."""

from __future__ import annotations

import dataclasses
import functools
import importlib

import numpy as np


@functools.lru_cache(maxsize=None)
def have_torch() -> bool:
    try:
        importlib.import_module("torch")
    except ImportError:
        return False
    return True


def _ml_dtypes_bfloat16():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


@dataclasses.dataclass(frozen=True)
class DType:
    name: str       # "bfloat16", "float32", "int32", "int64", "uint8"
    wire: int       # cakegrad.v1.DType value (matches cakegrad::kernels::DType)
    itemsize: int

    def torch_dtype(self):
        import torch

        return getattr(torch, self.name)

    def numpy_dtype(self) -> np.dtype:
        if self.name == "bfloat16":
            bf16 = _ml_dtypes_bfloat16()
            if bf16 is None:
                raise TypeError("numpy bfloat16 arrays need the ml_dtypes package "
                                "(pip install ml_dtypes), or pass torch tensors")
            return bf16
        return np.dtype(self.name)

    @property
    def wire_name(self) -> str:
        return {"bfloat16": "BF16", "float32": "FP32", "int32": "INT32", "int64": "INT64",
                "uint8": "UINT8"}[self.name]


BF16 = DType("bfloat16", 1, 2)
FP32 = DType("float32", 2, 4)
INT32 = DType("int32", 3, 4)
INT64 = DType("int64", 4, 8)
UINT8 = DType("uint8", 5, 1)
_BY_NAME = {d.name: d for d in (BF16, FP32, INT32, INT64, UINT8)}
_ALIASES = {"bf16": "bfloat16", "fp32": "float32", "float": "float32"}


def resolve(dtype) -> DType:
    """The DType for a torch dtype, numpy dtype or name; TypeError when the wire has none."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
    elif have_torch() and _is_torch_dtype(dtype):
        name = str(dtype).replace("torch.", "")
    else:
        name = np.dtype(dtype).name
    if name not in _BY_NAME:
        raise TypeError(f"dtype {name} is not supported (BF16, FP32, INT32, INT64, UINT8)")
    return _BY_NAME[name]


def _is_torch_dtype(dtype) -> bool:
    import torch

    return isinstance(dtype, torch.dtype)


def is_torch_tensor(x) -> bool:
    if not have_torch():
        return False
    import torch

    return isinstance(x, torch.Tensor)


def is_numpy(x) -> bool:
    return isinstance(x, np.ndarray)


def dtype_name(x) -> str:
    """The element type's name as a user would read it (e.g. "float64")."""
    if is_torch_tensor(x):
        return str(x.dtype).replace("torch.", "")
    return np.asarray(x).dtype.name


def host_address(x) -> tuple[int | None, int]:
    """(address, byte size) of a CPU tensor or numpy array's elements; (None, 0) else."""
    if is_torch_tensor(x):
        if x.device.type != "cpu":
            return None, 0
        return x.data_ptr(), x.numel() * x.element_size()
    if is_numpy(x):
        return x.__array_interface__["data"][0], x.nbytes
    return None, 0
