"""cakegrad: training forwards and backwards of mHC, causal conv1d and KDA, computed by the
node's cakegrad daemon.

    import cakegrad
    cakegrad.connect()          # CAKEGRAD_ADDRESS, else /run/cakegrad/cakegrad.sock
    from cakegrad.cake_causal_conv1d_train import cake_causal_conv1d_train_backward

The functions keep the names, parameters, defaults and return values of the kernel
library's API pages; torch CUDA tensors go to the daemon zero-copy (CUDA IPC), CPU tensors
and numpy arrays through shared memory (the host backend). ``cakegrad.nn`` has autograd
modules built on them. See client/python/README.md.
"""

from . import cake_causal_conv1d_train, cake_mhc_train, errors, kda_backward
from .client import DEFAULT_SOCKET, Client, connect, get_client, resolve_address, set_default_client
from .errors import (CakegradError, DaemonUnavailableError, FailedPreconditionError,
                     InvalidArgumentError, NotFoundError, PermissionDeniedError,
                     ResourceExhaustedError, SessionClosedError, UnimplementedError)
from .shm import is_shared, shared_empty, to_shared

__version__ = "0.1.0"

__all__ = [
    "CakegradError", "Client", "DEFAULT_SOCKET", "DaemonUnavailableError",
    "FailedPreconditionError", "InvalidArgumentError", "NotFoundError",
    "PermissionDeniedError", "ResourceExhaustedError", "SessionClosedError",
    "UnimplementedError", "cake_causal_conv1d_train", "cake_mhc_train", "connect", "errors",
    "get_client", "is_shared", "kda_backward", "nn", "resolve_address", "set_default_client",
    "shared_empty", "to_shared",
]


def __getattr__(name):
    if name == "nn":  # needs torch: imported on first use
        import importlib

        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module 'cakegrad' has no attribute {name!r}")
