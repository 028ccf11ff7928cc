"""What the daemon needs to map a torch CUDA tensor: the legacy CUDA IPC handle of the
allocation behind it, the allocation's base and size, and the GPU's UUID.

Two ways to get the handle (environment variable CAKEGRAD_CUDA_IPC):

* ``driver`` (the default): the CUDA driver API through ctypes, in the trainer's own
  context: cuPointerGetAttribute gives the allocation's range (RANGE_START_ADDR,
  RANGE_SIZE) and whether legacy IPC can share it (IS_LEGACY_CUDA_IPC_CAPABLE), and
  cuIpcGetMemHandle the 64-byte handle of its base. No side effect on the tensor.
* ``torch``: ``untyped_storage()._share_cuda_()``, whose handle is 66 bytes: a version
  byte (2), a type byte ('c' for cudaMalloc memory, 'e' for expandable segments) and the
  64-byte cudaIpcMemHandle of the allocation base; its 4th field is the storage's byte
  offset in the allocation. The region is then the storage's bytes only. Note that torch
  puts a shared storage behind a reference counter that only a torch consumer process
  decrements, so such storages are never handed back to the caching allocator; use it
  to cross-check the driver path, not for long training runs.

Both describe the same allocation with the same handle bytes, which key the client's
registration cache (never the address: the caching allocator may free a segment and get a
new one at the same address, with a new handle).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os

from .errors import FailedPreconditionError

_CUDA_SUCCESS = 0
_ATTR_RANGE_START_ADDR = 11
_ATTR_RANGE_SIZE = 12
_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE = 10
_IPC_HANDLE_SIZE = 64


class _IpcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * _IPC_HANDLE_SIZE)]


_EXPANDABLE_HELP = (
    "this CUDA memory comes from PyTorch's expandable segments, which legacy CUDA IPC "
    "cannot share with the cakegrad daemon: unset PYTORCH_CUDA_ALLOC_CONF="
    "expandable_segments:True (or set expandable_segments:False) before the process "
    "starts using CUDA")


@dataclasses.dataclass(frozen=True)
class CudaMemory:
    """The registrable memory behind a tensor."""

    handle: bytes             # 64-byte cudaIpcMemHandle of the allocation base
    region_start: int         # device address where the region starts
    region_size: int          # bytes
    offset_in_allocation: int # region_start - allocation base
    gpu_uuid: str


def mode() -> str:
    m = os.environ.get("CAKEGRAD_CUDA_IPC", "driver")
    if m not in ("driver", "torch"):
        raise ValueError(f"CAKEGRAD_CUDA_IPC must be 'driver' or 'torch', got {m!r}")
    return m


@functools.lru_cache(maxsize=None)
def _driver():
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
    lib.cuPointerGetAttribute.restype = ctypes.c_int
    lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_IpcMemHandle), ctypes.c_uint64]
    lib.cuIpcGetMemHandle.restype = ctypes.c_int
    lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuGetErrorString.restype = ctypes.c_int
    lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.cuCtxGetCurrent.restype = ctypes.c_int
    lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    lib.cuDeviceGet.restype = ctypes.c_int
    lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    lib.cuDevicePrimaryCtxRetain.restype = ctypes.c_int
    lib.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    lib.cuCtxSetCurrent.restype = ctypes.c_int
    return lib


def _ensure_context(lib, index: int) -> None:
    """Makes the device's primary context (the one torch uses) current on this thread when
    no context is: a thread that made no CUDA runtime call yet has none."""
    ctx = ctypes.c_void_p()
    _check(lib, lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if ctx.value:
        return
    dev = ctypes.c_int()
    _check(lib, lib.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
    _check(lib, lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.value),
           "cuDevicePrimaryCtxRetain")
    _check(lib, lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def _check(lib, rc: int, what: str) -> None:
    if rc != _CUDA_SUCCESS:
        msg = ctypes.c_char_p()
        lib.cuGetErrorString(rc, ctypes.byref(msg))
        text = msg.value.decode() if msg.value else f"CUresult {rc}"
        raise FailedPreconditionError(f"{what} failed: {text}")


@functools.lru_cache(maxsize=None)
def gpu_uuid(index: int) -> str:
    import torch

    uuid = torch.cuda.get_device_properties(index).uuid
    raw = getattr(uuid, "bytes", None)
    if raw is not None and len(raw) == 16:
        # The daemon's form (and nvidia-smi's): GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
        h = bytes(raw).hex()
        return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
    text = str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else "GPU-" + text


def _expandable_configured() -> bool:
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + os.environ.get(
        "PYTORCH_ALLOC_CONF", "")
    return "expandable_segments:true" in conf.replace(" ", "").lower()


def describe(tensor) -> CudaMemory:
    """The allocation behind a CUDA tensor, as the daemon registers it."""
    import torch

    index = tensor.device.index if tensor.device.index is not None else torch.cuda.current_device()
    if mode() == "torch":
        return _describe_torch(tensor, index)
    # The driver calls need the device's context current on this thread (the autograd engine
    # runs the backward on threads of its own); leaving restores the caller's device.
    with torch.cuda.device(index):
        return _describe_driver(tensor.untyped_storage().data_ptr(), index)


def _describe_driver(ptr: int, index: int) -> CudaMemory:
    lib = _driver()
    _ensure_context(lib, index)
    capable = ctypes.c_int(0)
    _check(lib, lib.cuPointerGetAttribute(ctypes.byref(capable),
                                          _ATTR_IS_LEGACY_CUDA_IPC_CAPABLE, ptr),
           "cuPointerGetAttribute(IS_LEGACY_CUDA_IPC_CAPABLE)")
    if not capable.value:
        if _expandable_configured():
            raise FailedPreconditionError(_EXPANDABLE_HELP)
        raise FailedPreconditionError(
            "this CUDA memory cannot be shared through legacy CUDA IPC (it was not "
            "allocated by cudaMalloc: expandable segments, a CUDA memory pool or VMM "
            "allocator); allocate the tensor with PyTorch's default caching allocator")
    start = ctypes.c_uint64(0)
    size = ctypes.c_size_t(0)
    _check(lib, lib.cuPointerGetAttribute(ctypes.byref(start), _ATTR_RANGE_START_ADDR, ptr),
           "cuPointerGetAttribute(RANGE_START_ADDR)")
    _check(lib, lib.cuPointerGetAttribute(ctypes.byref(size), _ATTR_RANGE_SIZE, ptr),
           "cuPointerGetAttribute(RANGE_SIZE)")
    handle = _IpcMemHandle()
    _check(lib, lib.cuIpcGetMemHandle(ctypes.byref(handle), start.value), "cuIpcGetMemHandle")
    # bytes(structure), not the c_char field: that one stops at the first zero byte.
    return CudaMemory(bytes(handle), start.value, size.value, 0, gpu_uuid(index))


def torch_share_handle(tensor):
    """(type byte, 64-byte handle, storage offset in the allocation, storage bytes) from
    torch's ``_share_cuda_()`` (DESIGN.md: a 66-byte handle, version 2, type 'c'/'e')."""
    storage = tensor.untyped_storage()
    shared = storage._share_cuda_()
    raw, offset, nbytes = shared[1], int(shared[3]), int(shared[2])
    if len(raw) == 66:
        kind, handle = raw[1:2], raw[2:]
    elif len(raw) == _IPC_HANDLE_SIZE:
        kind, handle = b"c", raw
    else:
        raise FailedPreconditionError(f"unexpected torch IPC handle of {len(raw)} bytes")
    return kind, handle, offset, nbytes


def _describe_torch(tensor, index: int) -> CudaMemory:
    kind, handle, offset, nbytes = torch_share_handle(tensor)
    if kind == b"e":
        raise FailedPreconditionError(_EXPANDABLE_HELP)
    if kind != b"c":
        raise FailedPreconditionError(f"unknown torch IPC handle type {kind!r}")
    start = tensor.untyped_storage().data_ptr()
    return CudaMemory(handle, start, nbytes, offset, gpu_uuid(index))
