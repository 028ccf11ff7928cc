"""Exceptions raised by the cakegrad package.

Every error carries a gRPC status code (``.code``, a ``grpc.StatusCode``) and the message
(``.message``): the daemon's own for errors it reported, the same codes for the argument
errors the package catches before sending anything. Each class also derives from the
builtin exception a Python caller would expect (``ValueError`` for bad arguments,
``NotImplementedError`` for operators the daemon's backend does not serve,
``ConnectionError`` for a daemon that cannot be reached).
"""

from __future__ import annotations

import grpc


class CakegradError(RuntimeError):
    """Base class: an error from the daemon or from the package's own checks."""

    default_code = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: grpc.StatusCode | None = None, operator: str = ""):
        self.code = code if code is not None else self.default_code
        self.message = message
        self.operator = operator
        where = f"{operator}: " if operator and not message.startswith(operator) else ""
        super().__init__(f"{self.code.name}: {where}{message}")

    @property
    def code_name(self) -> str:
        """The status code's name, e.g. "INVALID_ARGUMENT"."""
        return self.code.name


class InvalidArgumentError(CakegradError, ValueError):
    """A tensor of the wrong dtype, shape, device or layout, or an option out of range."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class UnimplementedError(CakegradError, NotImplementedError):
    """The daemon's backend does not serve this operator (yet)."""

    default_code = grpc.StatusCode.UNIMPLEMENTED


class NotFoundError(CakegradError, LookupError):
    """An unknown session or region (for example after the daemon restarted)."""

    default_code = grpc.StatusCode.NOT_FOUND


class FailedPreconditionError(CakegradError):
    """The call cannot run in the current state (memory that cannot be shared, a region
    of the wrong kind for the daemon's backend, ...)."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhaustedError(CakegradError):
    """A request beyond the daemon's configured workspace or region limits."""

    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class PermissionDeniedError(CakegradError, PermissionError):
    """The daemon refused access (socket permissions, foreign memory)."""

    default_code = grpc.StatusCode.PERMISSION_DENIED


class DaemonUnavailableError(CakegradError, ConnectionError):
    """The daemon is not running, not reachable at the address, or went away."""

    default_code = grpc.StatusCode.UNAVAILABLE


class SessionClosedError(DaemonUnavailableError):
    """The session's stream ended (the daemon shut down or restarted, or the client was
    closed): connect again; regions registered in the old session are gone."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgumentError,
    grpc.StatusCode.UNIMPLEMENTED: UnimplementedError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAVAILABLE: DaemonUnavailableError,
}


def from_rpc_error(err: grpc.RpcError, operator: str = "") -> CakegradError:
    """The package's exception for a failed RPC, keeping the daemon's code and message."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    cls = _BY_CODE.get(code, CakegradError)
    return cls(details or code.name, code, operator)
