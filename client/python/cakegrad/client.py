"""The connection to the daemon: one session, its registered memory, and raw RPCs.

A :class:`Client` opens a session with the daemon's ``OpenSession`` stream and keeps that
stream open in a background thread for the session's life: when the client closes it, or
the process dies, the daemon releases everything the session registered. Memory is
registered once per session and cached:

* host memory: one region per shared-memory pool segment (:mod:`cakegrad.shm`);
* CUDA memory: one region per allocation of PyTorch's caching allocator, keyed by the
  allocation's 64-byte IPC handle (never by address: a freed segment's address can come
  back with a new handle). A new allocation that overlaps a cached one means the old one
  was freed: its registration is dropped first.

The operator modules use the process's default client (:func:`get_client`), which
:func:`connect` sets; without a call to :func:`connect` the first operator call connects to
the default address.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
import weakref

import grpc

from . import errors
from .errors import DaemonUnavailableError, SessionClosedError

try:
    from .v1 import regions_pb2, service_pb2, service_pb2_grpc, session_pb2
except ImportError as exc:  # pragma: no cover - a checkout without generated code
    raise ImportError(
        "cakegrad's generated protobuf code is missing: run client/python/generate_proto.sh "
        f"(it writes client/python/cakegrad/v1/) ({exc})") from exc

DEFAULT_SOCKET = "/run/cakegrad/cakegrad.sock"
ADDRESS_ENV = "CAKEGRAD_ADDRESS"
_CONNECT_TIMEOUT_S = float(os.environ.get("CAKEGRAD_CONNECT_TIMEOUT", "10"))
# EVENT completion slots per device (CAKEGRAD_COMPLETION=event); calls beyond that wait.
_EVENT_SLOTS = int(os.environ.get("CAKEGRAD_EVENT_SLOTS", "8"))


def completion_mode() -> str:
    """"sync" (the default) or "event", from CAKEGRAD_COMPLETION."""
    mode = os.environ.get("CAKEGRAD_COMPLETION", "sync").strip().lower()
    if mode not in ("sync", "event"):
        raise ValueError(f"CAKEGRAD_COMPLETION must be sync or event, got {mode!r}")
    return mode


class EventRing:
    """A session's EVENT completion slots on one CUDA device: the trainer's ready events (the
    daemon's stream waits on them) and the daemon's done events (the trainer's stream waits
    on them). A slot is taken for one call and given back once its reply arrived."""

    def __init__(self, ready, done):
        import queue

        self.ready = ready
        self.done = done
        self._free = queue.SimpleQueue()
        for slot in range(len(ready)):
            self._free.put(slot)

    def acquire(self) -> int:
        return self._free.get()

    def release(self, slot: int) -> None:
        self._free.put(slot)


def resolve_address(address: str | None = None) -> str:
    """The gRPC target: the argument, else $CAKEGRAD_ADDRESS, else the default socket.

    A plain path ("/run/x.sock", "./x.sock") means a Unix socket; "unix:PATH" and
    "unix://PATH" (PATH absolute) are taken as they are."""
    address = address or os.environ.get(ADDRESS_ENV) or DEFAULT_SOCKET
    if address.startswith("unix:"):
        return address
    if address.startswith(("/", ".")) or os.sep in address:
        return "unix:" + os.path.abspath(address)
    return address


def _socket_path(target: str) -> str | None:
    if target.startswith("unix://"):
        return target[len("unix://"):]
    if target.startswith("unix:"):
        return target[len("unix:"):]
    return None


def _probe_socket(target: str) -> None:
    """Fails fast, with a message a user can act on, when nothing listens on the socket."""
    path = _socket_path(target)
    if path is None:
        return
    hint = (f"start the daemon (cakegradd --socket={path}) or point {ADDRESS_ENV} / "
            "cakegrad.connect(address) at its socket")
    if not os.path.exists(path):
        raise DaemonUnavailableError(
            f"cakegrad daemon is not running: no socket at {path}; {hint}")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(_CONNECT_TIMEOUT_S)
        probe.connect(path)
    except ConnectionRefusedError:
        raise DaemonUnavailableError(
            f"cakegrad daemon is not running: {path} exists but nothing listens on it "
            f"(a stale socket?); {hint}") from None
    except PermissionError:
        raise errors.PermissionDeniedError(
            f"no permission to connect to the cakegrad daemon's socket {path}") from None
    except OSError as exc:
        raise DaemonUnavailableError(f"cannot connect to {path}: {exc}; {hint}") from None
    finally:
        probe.close()


_live_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


class Client:
    """One session with the daemon. Thread safe; not usable across fork (a forked child
    connects anew through :func:`get_client`)."""

    def __init__(self, address: str | None = None, *, client_name: str | None = None,
                 timeout: float | None = None, connect_timeout: float | None = None):
        self.target = resolve_address(address)
        self.pid = os.getpid()
        self.timeout = timeout
        self._lock = threading.RLock()
        self._closed = False
        self._session_end: str | None = None
        self._host_regions: dict[str, int] = {}
        self._cuda_regions: dict[tuple, tuple[int, int, int, str]] = {}
        self._capabilities = None
        self._event_rings: dict[int, EventRing | None] = {}
        connect_timeout = _CONNECT_TIMEOUT_S if connect_timeout is None else connect_timeout

        _probe_socket(self.target)
        self._channel = grpc.insecure_channel(self.target)
        self._stub = service_pb2_grpc.CakegradStub(self._channel)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise DaemonUnavailableError(
                f"cakegrad daemon at {self.target} did not accept a connection within "
                f"{connect_timeout:g} s") from None

        self.session_id = ""
        self._open_session(client_name or f"python-{os.getpid()}",
                           time.monotonic() + connect_timeout)
        _live_clients.add(self)

    # -- session -------------------------------------------------------------------------

    def _open_session(self, name: str, deadline: float) -> None:
        """Opens the OpenSession stream; retries while the daemon answers UNAVAILABLE (it
        refuses sessions until its backend is ready) until the deadline."""
        while True:
            self._session_end = None
            stream = self._stub.OpenSession(session_pb2.OpenSessionRequest(client_name=name))
            self._stream = stream
            started = threading.Event()
            self._stream_thread = threading.Thread(
                target=self._pump_session, args=(stream, started), name="cakegrad-session",
                daemon=True)
            self._stream_thread.start()
            started.wait(max(0.0, deadline - time.monotonic()))
            if self.session_id:
                return
            stream.cancel()
            retry = (self._session_end or "").startswith("UNAVAILABLE")
            if not retry or time.monotonic() + 0.2 > deadline:
                self._channel.close()
                reason = self._session_end or "no session id within the timeout"
                raise DaemonUnavailableError(f"cakegrad daemon at {self.target} opened no "
                                             f"session: {reason}")
            time.sleep(0.2)

    def _pump_session(self, stream, started: threading.Event) -> None:
        """Keeps the OpenSession stream open; its end ends the session."""
        try:
            for event in stream:
                if not self.session_id:
                    self.session_id = event.session_id
                    started.set()
            end = "the daemon ended the session"
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.CANCELLED and self._closed:
                end = "the client was closed"
            else:
                end = f"{exc.code().name}: {exc.details()}"
        if stream is self._stream:  # not an abandoned attempt of _open_session
            self._session_end = end
        started.set()

    @property
    def closed(self) -> bool:
        return self._closed or self._session_end is not None

    def _check_open(self) -> None:
        if self.pid != os.getpid():
            raise SessionClosedError("this client belongs to the parent process (fork): "
                                     "call cakegrad.connect() in the child")
        if self._closed:
            raise SessionClosedError("the client was closed: call cakegrad.connect() again")
        if self._session_end is not None:
            raise SessionClosedError(f"the session with {self.target} ended "
                                     f"({self._session_end}): call cakegrad.connect() again")

    def close(self) -> None:
        """Ends the session: the daemon releases every region it registered."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.pid == os.getpid():
            if self._session_end is None and self.session_id:
                try:
                    self._stub.CloseSession(
                        session_pb2.CloseSessionRequest(session_id=self.session_id), timeout=5)
                except grpc.RpcError:
                    pass
            self._stream.cancel()
            self._channel.close()
        self._host_regions.clear()
        self._cuda_regions.clear()
        self._event_rings.clear()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"session {self.session_id}"
        return f"<cakegrad.Client {self.target} {state}>"

    # -- raw RPCs ------------------------------------------------------------------------

    def _rpc(self, method: str, request, operator: str = "", timeout: float | None = None):
        self._check_open()
        try:
            return getattr(self._stub, method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            err = errors.from_rpc_error(exc, operator or method)
            if self._session_end is not None and isinstance(err, DaemonUnavailableError):
                raise SessionClosedError(f"the session with {self.target} ended "
                                         f"({self._session_end})", operator=operator) from None
            raise err from None

    def run(self, request: "service_pb2.RunRequest", operator: str = ""):
        """Sends one RunRequest (session id filled in); returns the RunResponse."""
        request.session_id = self.session_id
        return self._rpc("Run", request, operator)

    def capabilities(self):
        """The daemon's Capabilities (backend, devices, operators, limits); cached."""
        if self._capabilities is None:
            self._capabilities = self._rpc("GetCapabilities",
                                           service_pb2.GetCapabilitiesRequest())
        return self._capabilities

    def backend(self) -> str | None:
        """"cuda" or "host"; None when the daemon does not answer GetCapabilities."""
        try:
            return self.capabilities().backend or None
        except errors.UnimplementedError:
            return None

    def server_status(self):
        """The daemon's ServerStatus (sessions, regions, mapped bytes, requests)."""
        return self._rpc("GetServerStatus", service_pb2.GetServerStatusRequest())

    def list_regions(self):
        """This session's regions (RegionInfo list)."""
        resp = self._rpc("ListRegions",
                         regions_pb2.ListRegionsRequest(session_id=self.session_id))
        return list(resp.regions)

    def workspace_size(self, operator: str, *, tokens: int = 0, channels: int = 0,
                       heads: int = 0, batch: int = 0, num_docs: int = 0) -> int:
        """Bytes of caller-owned workspace the operator needs for these shapes."""
        req = service_pb2.WorkspaceSizeRequest(operator=operator, tokens=tokens,
                                               channels=channels, heads=heads, batch=batch,
                                               num_docs=num_docs)
        return int(self._rpc("GetWorkspaceSize", req, operator).bytes)

    # -- memory registration -------------------------------------------------------------

    def host_region(self, segment) -> int:
        """The region id of a shared-memory pool segment, registering it on first use."""
        with self._lock:
            region = self._host_regions.get(segment.name)
            if region is None:
                req = regions_pb2.RegisterRegionRequest(
                    session_id=self.session_id, label=f"shm {segment.name}",
                    host=regions_pb2.HostRegion(shm_name=segment.shm_name,
                                                byte_size=segment.size))
                region = self._rpc("RegisterRegion", req).region_id
                self._host_regions[segment.name] = region
            return region

    def cuda_region(self, memory) -> tuple[int, int]:
        """(region id, device address where the region starts) for a _cuda.CudaMemory,
        registering it on first use."""
        key = (memory.handle, memory.offset_in_allocation, memory.region_size)
        with self._lock:
            hit = self._cuda_regions.get(key)
            if hit is not None:
                return hit[0], hit[1]
            self._drop_overlapping(memory)
            req = regions_pb2.RegisterRegionRequest(
                session_id=self.session_id, label=f"cuda {memory.gpu_uuid}",
                cuda=regions_pb2.CudaRegion(
                    ipc_handle=memory.handle, byte_size=memory.region_size,
                    gpu_uuid=memory.gpu_uuid,
                    offset_in_allocation=memory.offset_in_allocation))
            region = self._rpc("RegisterRegion", req).region_id
            self._cuda_regions[key] = (region, memory.region_start, memory.region_size,
                                       memory.gpu_uuid)
            return region, memory.region_start

    def event_ring(self, index: int) -> EventRing | None:
        """The EVENT completion ring on CUDA device `index`, registered on first use; None
        (with a warning, once) when the daemon refuses it: the calls then use SYNC."""
        with self._lock:
            if index in self._event_rings:
                return self._event_rings[index]
            import warnings

            import torch

            from . import _cuda

            with torch.cuda.device(index):
                ready = [torch.cuda.Event(enable_timing=False, blocking=False, interprocess=True)
                         for _ in range(_EVENT_SLOTS)]
                handles = [bytes(e.ipc_handle()) for e in ready]
            req = service_pb2.RegisterEventsRequest(
                session_id=self.session_id, gpu_uuid=_cuda.gpu_uuid(index), ready_events=handles)
            try:
                done_handles = list(self._rpc("RegisterEvents", req).done_events)
                done = [torch.cuda.Event.from_ipc_handle(index, h) for h in done_handles]
            except RuntimeError as e:  # the daemon refused (a CakegradError), or torch did
                warnings.warn(f"cakegrad: EVENT completion unavailable on cuda:{index} ({e}); "
                              "using SYNC (one stream synchronization per call)")
                self._event_rings[index] = None
                return None
            ring = EventRing(ready, done)
            self._event_rings[index] = ring
            return ring

    def _drop_overlapping(self, memory) -> None:
        """Unregisters cached regions whose address range the new allocation reuses: their
        allocation was freed (the daemon would otherwise keep it mapped until the session
        ends)."""
        start, end = memory.region_start, memory.region_start + memory.region_size
        for key, (region, r_start, r_size, uuid) in list(self._cuda_regions.items()):
            if uuid == memory.gpu_uuid and r_start < end and start < r_start + r_size:
                del self._cuda_regions[key]
                try:
                    self.unregister_region(region)
                except errors.NotFoundError:
                    pass

    def unregister_region(self, region_id: int) -> None:
        self._rpc("UnregisterRegion", regions_pb2.UnregisterRegionRequest(
            session_id=self.session_id, region_id=region_id))

    def release_cuda_regions(self) -> None:
        """Unregisters every cached CUDA region (for example after torch.cuda.empty_cache()
        handed memory back to the driver); they are registered again on next use."""
        with self._lock:
            regions = [v[0] for v in self._cuda_regions.values()]
            self._cuda_regions.clear()
        for region in regions:
            try:
                self.unregister_region(region)
            except errors.NotFoundError:
                pass


_default: Client | None = None
_default_address: str | None = None
_default_lock = threading.Lock()


def connect(address: str | None = None, *, client_name: str | None = None,
            timeout: float | None = None) -> Client:
    """Connects to the daemon and makes the client the process's default.

    ``address``: the daemon's socket ("unix:/path", "unix:///path" or a path); when None,
    the environment variable CAKEGRAD_ADDRESS, else /run/cakegrad/cakegrad.sock.
    ``timeout``: seconds to wait for each RPC (None: no deadline).
    Raises DaemonUnavailableError when no daemon answers there."""
    global _default, _default_address
    client = Client(address, client_name=client_name, timeout=timeout)
    with _default_lock:
        _default, _default_address = client, address
    return client


def get_client() -> Client:
    """The process's default client: the last one :func:`connect` returned, else one
    connected to the default address on first use (again after a fork, to the same
    address)."""
    global _default
    with _default_lock:
        client = _default
        if client is not None and client.pid == os.getpid():
            return client
        address = _default_address
    client = Client(address)
    with _default_lock:
        _default = client
    return client


def set_default_client(client: Client | None) -> None:
    """Makes ``client`` the one the operator functions use (None: connect on next use)."""
    global _default, _default_address
    with _default_lock:
        _default = client
        _default_address = client.target if client is not None else None


@atexit.register
def _close_all() -> None:
    for client in list(_live_clients):
        if client.pid == os.getpid():
            client.close()
