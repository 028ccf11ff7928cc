"""One operator call: arguments to TensorRefs, outputs allocated, the Run RPC, copies back.

Where the package synchronizes:

* CUDA tensors, SYNC completion (the default): before sending the request,
  ``torch.cuda.current_stream(device).synchronize()`` on the device of the call's tensors,
  so that every input the trainer's stream produced is in memory when the daemon reads it
  on its own stream (and every earlier use of the outputs' memory has finished). The daemon
  replies after its GPU work finished, so the outputs are ready when the function returns
  and nothing waits after. That is one host-side stream synchronization per operator call.
* CUDA tensors, EVENT completion (``CAKEGRAD_COMPLETION=event``; the trainer must run as
  the daemon's user): no host synchronization. The call records a ready event on the current
  stream, the daemon's stream waits on it, and the current stream waits on the daemon's done
  event before anything queued after the call; the function returns once the daemon has
  enqueued the work. If the daemon refuses event rings the package warns once and uses SYNC.
* Host tensors: nothing to synchronize; the reply comes after the CPU work finished.

Host-backend arguments that are not in the shared-memory pool are copied into it before
the call, and outputs passed in that way are copied back after it (cakegrad.shm).
"""

from __future__ import annotations

import numpy as np

from . import _cuda, _dtypes, shm
from .client import Client, get_client
from .errors import FailedPreconditionError, InvalidArgumentError
from .v1 import service_pb2, tensor_pb2


def _shape(x) -> tuple[int, ...]:
    return tuple(int(s) for s in x.shape)


def _is_array(x) -> bool:
    return _dtypes.is_torch_tensor(x) or _dtypes.is_numpy(x)


class Call:
    """Builds one request. ``primary`` (the first tensor argument) decides where outputs
    live: on its CUDA device, or in shared memory as a torch tensor or numpy array."""

    def __init__(self, operator: str, primary, primary_name: str):
        self.operator = operator
        if not _is_array(primary):
            raise self.error(primary_name, f"expected a torch.Tensor or numpy.ndarray, got "
                                           f"{type(primary).__name__}")
        self.cuda = _dtypes.is_torch_tensor(primary) and primary.device.type == "cuda"
        self.device = primary.device if self.cuda else None
        self.numpy_out = _dtypes.is_numpy(primary)
        self.client: Client = get_client()
        self._empty_refs: list[tensor_pb2.TensorRef] = []  # in the request, region unset
        self._some_region: int | None = None
        self._keep = []         # temporary shared copies, alive until the call returns
        self._copy_back = []    # (caller's output, its shared copy)
        self._check_backend()

    # -- errors and checks ---------------------------------------------------------------

    def error(self, name: str, message: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"argument '{name}': {message}", operator=self.operator)

    def _check_backend(self) -> None:
        backend = self.client.backend()
        if backend == "host" and self.cuda:
            raise FailedPreconditionError(
                f"the daemon at {self.client.target} runs the host backend: pass CPU tensors "
                "or numpy arrays (CUDA tensors need a daemon with --backend=cuda)",
                operator=self.operator)
        if backend == "cuda" and not self.cuda:
            raise FailedPreconditionError(
                f"the daemon at {self.client.target} runs the cuda backend: pass CUDA tensors "
                "(CPU tensors and numpy arrays need a daemon with --backend=host)",
                operator=self.operator)

    def dims(self, name: str, x, ndim: int, layout: str) -> tuple[int, ...]:
        """x's shape, after checking it is an array of ndim dimensions."""
        if not _is_array(x):
            raise self.error(name, f"expected a tensor, got {type(x).__name__}")
        shape = _shape(x)
        if len(shape) != ndim:
            raise self.error(name, f"expected {layout}, got shape {list(shape)}")
        return shape

    # -- allocation ----------------------------------------------------------------------

    def empty(self, shape, dtype):
        """An uninitialized output where the call's outputs live."""
        dt = _dtypes.resolve(dtype)
        if self.cuda:
            import torch

            return torch.empty(tuple(shape), dtype=dt.torch_dtype(), device=self.device)
        return shm.shared_empty(shape, dt, like="numpy" if self.numpy_out else "torch")

    def zeros(self, shape, dtype):
        out = self.empty(shape, dtype)
        out[...] = 0
        return out

    def index_tensor(self, name: str, x):
        """cu_seqlens as the call needs it: a list or tuple becomes an int32 array; a CPU
        tensor is moved to the call's CUDA device (a copy)."""
        if x is None:
            return None
        if isinstance(x, (list, tuple)):
            values = np.asarray(x, dtype=np.int32)
            out = self.empty(values.shape, "int32")
            if self.cuda or not self.numpy_out:
                import torch

                out.copy_(torch.from_numpy(values))
            else:
                out[...] = values
            return out
        if self.cuda and _dtypes.is_torch_tensor(x) and x.device.type == "cpu":
            return x.to(self.device)
        return x

    # -- references ----------------------------------------------------------------------

    def set(self, message, field: str, x, *, name: str | None = None, output: bool = False):
        """Fills ``message.<field>`` with the TensorRef of x (nothing when x is None)."""
        if x is None:
            return
        ref = self.ref(name or field, x, output=output)
        getattr(message, field).CopyFrom(ref)
        if ref.region_id == 0:
            self._empty_refs.append(getattr(message, field))

    def ref(self, name: str, x, *, output: bool = False) -> tensor_pb2.TensorRef:
        if not _is_array(x):
            raise self.error(name, f"expected a torch.Tensor or numpy.ndarray, got "
                                   f"{type(x).__name__}")
        try:
            dt = _dtypes.resolve(x.dtype)
        except TypeError:
            raise self.error(name, f"dtype {_dtypes.dtype_name(x)} is not supported "
                                   "(BF16, FP32, INT32, INT64, UINT8)") from None
        is_torch = _dtypes.is_torch_tensor(x)
        if not (x.is_contiguous() if is_torch else x.flags.c_contiguous):
            strides = list(x.stride()) if is_torch else [s // x.itemsize for s in x.strides]
            raise self.error(name, f"must be contiguous, got shape {list(_shape(x))} with "
                                   f"element strides {strides}")
        ref = tensor_pb2.TensorRef(dtype=dt.wire, shape=_shape(x))
        nbytes = dt.itemsize * int(np.prod(_shape(x), dtype=np.int64))
        if nbytes == 0:
            # Zero bytes lie inside any region: run() puts it in one of the call's regions.
            return ref
        if self.cuda:
            ref.region_id, ref.offset = self._cuda_ref(name, x)
        else:
            ref.region_id, ref.offset = self._host_ref(name, x, output)
        self._some_region = ref.region_id
        return ref

    def _cuda_ref(self, name: str, x) -> tuple[int, int]:
        if not _dtypes.is_torch_tensor(x) or x.device.type != "cuda":
            where = "a numpy array" if _dtypes.is_numpy(x) else f"on {x.device}"
            raise self.error(name, f"is {where}, but the call's tensors are on {self.device}")
        if x.device != self.device:
            raise self.error(name, f"is on {x.device}, but the call's tensors are on "
                                   f"{self.device}")
        region, start = self.client.cuda_region(_cuda.describe(x))
        return region, x.data_ptr() - start

    def _host_ref(self, name: str, x, output: bool) -> tuple[int, int]:
        if _dtypes.is_torch_tensor(x) and x.device.type != "cpu":
            raise self.error(name, f"is on {x.device}, but the call's tensors are on the host")
        address, nbytes = _dtypes.host_address(x)
        found = shm.pool().find(address, nbytes)
        if found is None:
            copy = shm.shared_empty(_shape(x), x.dtype,
                                    like="torch" if _dtypes.is_torch_tensor(x) else "numpy")
            if _dtypes.is_torch_tensor(x):
                copy.copy_(x.detach())
            else:
                np.copyto(copy, x)
            self._keep.append(copy)
            if output:
                self._copy_back.append((x, copy))
            address, nbytes = _dtypes.host_address(copy)
            found = shm.pool().find(address, nbytes)
        segment, offset = found
        return self.client.host_region(segment), offset

    # -- the call ------------------------------------------------------------------------

    def run(self, field: str, request) -> "service_pb2.RunResponse":
        """Sends the operator request in RunRequest.<field> (SYNC completion)."""
        if self._empty_refs and self._some_region is None and not self.cuda:
            self._keep.append(shm.shared_empty((1,), "uint8", like="numpy"))
            self._some_region = self.client.host_region(shm.pool().segments[0])
        for ref in self._empty_refs:
            ref.region_id = self._some_region or 0
            ref.offset = 0
        run = service_pb2.RunRequest(
            completion=service_pb2.Completion(mode=service_pb2.Completion.SYNC))
        getattr(run, field).CopyFrom(request)
        ring = None
        if self.cuda:
            import torch

            from .client import completion_mode

            stream = torch.cuda.current_stream(self.device)
            if completion_mode() == "event":
                ring = self.client.event_ring(self.device.index)
            if ring is None:
                # SYNC completion: the daemon reads the inputs on its own stream as soon as the
                # request arrives, so everything queued on the trainer's stream must be done.
                stream.synchronize()
        if ring is None:
            response = self.client.run(run, self.operator)
        else:
            slot = ring.acquire()
            try:
                ring.ready[slot].record(stream)
                run.completion.mode = service_pb2.Completion.EVENT
                run.completion.slot = slot
                response = self.client.run(run, self.operator)
                stream.wait_event(ring.done[slot])
            finally:
                ring.release(slot)
        for target, copy in self._copy_back:
            if _dtypes.is_torch_tensor(target):
                with _no_grad():
                    target.copy_(copy)
            else:
                np.copyto(target, copy)
        self._keep.clear()
        self._copy_back.clear()
        return response


class _no_grad:
    def __enter__(self):
        import torch

        self._ctx = torch.no_grad()
        self._ctx.__enter__()

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
