"""A stand-in for `cakegradd --backend=host`, in Python, for developing the client without
the C++ build: the same gRPC service over a Unix socket, host regions through POSIX shared
memory, operators computed by torch_reference (float64, outputs rounded once).

It checks far less than the real daemon (no shape validation beyond what torch raises) and
proves nothing about it: the tests use it only when CAKEGRAD_DAEMON=fake.

    python tests/python/fake_daemon.py --socket=/tmp/x.sock [--unimplemented=mhc,kda]
"""

from __future__ import annotations

import argparse
import itertools
import mmap
import os
import sys
import threading
import uuid
from concurrent import futures

import grpc
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
sys.path.insert(0, HERE)

import torch_reference as ref  # noqa: E402
from cakegrad.v1 import (regions_pb2, service_pb2, service_pb2_grpc,  # noqa: E402
                         session_pb2)

_DTYPES = {1: torch.bfloat16, 2: torch.float32, 3: torch.int32, 4: torch.int64, 5: torch.uint8}
_OPS = ("conv1d_forward", "conv1d_backward", "mhc_forward_prepare", "mhc_forward_stats",
        "mhc_forward_finish", "mhc_backward_prepare", "mhc_backward_finish", "kda_forward",
        "kda_backward")


class _Abort(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


class FakeDaemon(service_pb2_grpc.CakegradServicer):
    def __init__(self, unimplemented: set[str]):
        self.unimplemented = unimplemented
        self.lock = threading.Lock()
        self.sessions: dict[str, threading.Event] = {}
        self.regions: dict[int, tuple[str, mmap.mmap]] = {}
        self.ids = itertools.count(1)
        self.served = self.failed = 0

    # -- sessions and regions ---------------------------------------------------------------

    def OpenSession(self, request, context):
        sid = uuid.uuid4().hex
        done = threading.Event()
        with self.lock:
            self.sessions[sid] = done
        context.add_callback(done.set)
        try:
            yield session_pb2.SessionEvent(session_id=sid)
            done.wait()
        finally:
            self._end(sid)

    def _end(self, sid):
        with self.lock:
            self.sessions.pop(sid, None)
            for rid in [r for r, (s, _) in self.regions.items() if s == sid]:
                self.regions.pop(rid)

    def CloseSession(self, request, context):
        with self.lock:
            done = self.sessions.get(request.session_id)
        if done is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown session")
        done.set()
        self._end(request.session_id)
        return session_pb2.CloseSessionResponse()

    def _session(self, sid, context):
        if sid not in self.sessions:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown session {sid!r}")

    def RegisterRegion(self, request, context):
        self._session(request.session_id, context)
        if request.WhichOneof("memory") != "host":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "this daemon runs the host backend")
        path = "/dev/shm" + request.host.shm_name
        try:
            with open(path, "r+b") as f:
                mm = mmap.mmap(f.fileno(), request.host.byte_size)
        except FileNotFoundError:
            context.abort(grpc.StatusCode.NOT_FOUND,
                          f"no shared-memory object named {request.host.shm_name}")
        with self.lock:
            rid = next(self.ids)
            self.regions[rid] = (request.session_id, mm)
        return regions_pb2.RegisterRegionResponse(region_id=rid)

    def UnregisterRegion(self, request, context):
        with self.lock:
            if self.regions.get(request.region_id, (None,))[0] != request.session_id:
                context.abort(grpc.StatusCode.NOT_FOUND, f"region {request.region_id} is not "
                                                         "registered")
            self.regions.pop(request.region_id)
        return regions_pb2.UnregisterRegionResponse()

    def ListRegions(self, request, context):
        with self.lock:
            out = [regions_pb2.RegionInfo(region_id=r, byte_size=len(mm), kind="host")
                   for r, (s, mm) in self.regions.items() if s == request.session_id]
        return regions_pb2.ListRegionsResponse(regions=out)

    def GetCapabilities(self, request, context):
        return service_pb2.Capabilities(
            version="fake", backend="host", protocol="cakegrad.v1",
            operators=[service_pb2.OperatorInfo(
                name=o, implemented=o.split("_")[0] not in self.unimplemented) for o in _OPS])

    def GetServerStatus(self, request, context):
        with self.lock:
            return service_pb2.ServerStatus(
                sessions=len(self.sessions), regions=len(self.regions),
                mapped_bytes=sum(len(mm) for _, mm in self.regions.values()),
                requests_served=self.served, requests_failed=self.failed)

    def GetWorkspaceSize(self, request, context):
        return service_pb2.WorkspaceSizeResponse(bytes=4096 + 4 * request.channels)

    # -- operators ---------------------------------------------------------------------------

    def Run(self, request, context):
        self._session(request.session_id, context)
        op = request.WhichOneof("op")
        try:
            if op.split("_")[0] in self.unimplemented:
                raise _Abort(grpc.StatusCode.UNIMPLEMENTED,
                             f"{op} is not implemented on the host backend yet")
            getattr(self, "_" + op)(getattr(request, op), request.session_id)
        except _Abort as exc:
            self.failed += 1
            context.abort(exc.code, exc.message)
        except (RuntimeError, ValueError, IndexError) as exc:
            self.failed += 1
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{op}: {exc}")
        self.served += 1
        return service_pb2.RunResponse(operator=op)

    def _t(self, msg, field, sid, required=True):
        if not msg.HasField(field):
            if required:
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} is required")
            return None
        r = getattr(msg, field)
        owner, mm = self.regions.get(r.region_id, (None, None))
        if owner != sid:
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"{field}: region {r.region_id} is not "
                                                    "registered")
        dtype = _DTYPES[r.dtype]
        count = 1
        for s in r.shape:
            count *= s
        nbytes = count * torch.empty(0, dtype=dtype).element_size()
        if r.offset + nbytes > len(mm):
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} lies outside its region")
        if nbytes == 0:
            return torch.empty(tuple(r.shape), dtype=dtype)
        raw = torch.frombuffer(mm, dtype=torch.uint8, count=nbytes, offset=r.offset)
        return raw.view(dtype).view(tuple(r.shape))

    @staticmethod
    def _put(out, value):
        out.copy_(value.to(torch.float32).to(out.dtype) if out.dtype == torch.bfloat16
                  else value.to(out.dtype))

    @staticmethod
    def _check_cu(cu, S):
        if cu.numel() < 1 or int(cu[0]) != 0 or int(cu[-1]) != S or (cu[1:] < cu[:-1]).any():
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "cu_seqlens must run from 0 to S "
                                                           "without decreasing")

    def _conv1d_forward(self, m, sid):
        x, w, cu = (self._t(m, f, sid) for f in ("x", "weight", "cu_seqlens"))
        self._check_cu(cu, x.shape[0])
        b = self._t(m, "bias", sid, False)
        self._put(self._t(m, "y", sid), ref.conv1d_forward(x, w, cu, b))

    def _conv1d_backward(self, m, sid):
        x, w, cu, dy = (self._t(m, f, sid) for f in ("x", "weight", "cu_seqlens", "dy"))
        b = self._t(m, "bias", sid, False)
        policy = "fp32" if m.silu_grad_preactivation == 2 else "bf16"
        dx, dw, db = ref.conv1d_backward(x, w, cu, dy, b, policy)
        self._put(self._t(m, "dx", sid), dx)
        self._put(self._t(m, "dweight", sid), dw)
        if b is not None:
            self._put(self._t(m, "dbias", sid), db)

    @staticmethod
    def _mhc_opts(m):
        o = m.options
        return dict(rms_eps=o.rms_eps if o.HasField("rms_eps") else 1e-5,
                    hc_eps=o.hc_eps if o.HasField("hc_eps") else 1e-6,
                    sinkhorn_iters=o.sinkhorn_iters if o.HasField("sinkhorn_iters") else 20)

    def _mhc_forward_prepare(self, m, sid):
        X, fn, scale, base = (self._t(m, f, sid) for f in ("x", "fn", "scale", "base"))
        out = ref.mhc_forward(X, fn, scale, base, **self._mhc_opts(m))
        self._put(self._t(m, "u", sid), out["U"])
        self._put(self._t(m, "stats", sid), out["stats"])

    def _mhc_forward_stats(self, m, sid):
        X, fn, scale, base = (self._t(m, f, sid) for f in ("x", "fn", "scale", "base"))
        self._put(self._t(m, "stats", sid),
                  ref.mhc_forward(X, fn, scale, base, **self._mhc_opts(m))["stats"])

    def _mhc_forward_finish(self, m, sid):
        X, B, stats = (self._t(m, f, sid) for f in ("x", "b", "stats"))
        self._put(self._t(m, "y", sid), ref.mhc_forward_finish(X, B, stats))

    def _mhc_backward_prepare(self, m, sid):
        X, dY, B, stats = (self._t(m, f, sid) for f in ("x", "dy", "b", "stats"))
        dB, gs = ref.mhc_backward_prepare(X, dY, B, stats)
        self._put(self._t(m, "db", sid), dB)
        self._put(self._t(m, "grad_stats", sid), gs)

    def _mhc_backward_finish(self, m, sid):
        names = ("x", "dy", "du", "fn", "scale", "base", "stats", "grad_stats")
        args = [self._t(m, f, sid) for f in names]
        grads = ref.mhc_backward_finish(*args, **self._mhc_opts(m))
        for field, value in zip(("dx", "dfn", "dscale", "dbase"), grads):
            out = self._t(m, field, sid)
            if m.accumulate and field != "dx":
                value = value + out.to(torch.float64)
            self._put(out, value)

    @staticmethod
    def _kda_opts(m):
        o = m.options
        return dict(scale=o.scale if o.HasField("scale") else None,
                    lower_bound=o.lower_bound if o.HasField("lower_bound") else -5.0)

    def _kda_forward(self, m, sid):
        ins = [self._t(m, f, sid) for f in ("q", "k", "v", "g", "beta", "a_log", "dt_bias")]
        o, final = ref.kda_forward(*ins, self._t(m, "initial_state", sid, False),
                                   self._t(m, "cu_seqlens", sid, False), **self._kda_opts(m))
        self._put(self._t(m, "o", sid), o)
        self._put(self._t(m, "final_state", sid), final)

    def _kda_backward(self, m, sid):
        ins = [self._t(m, f, sid) for f in ("q", "k", "v", "g", "beta", "a_log", "dt_bias",
                                            "initial_state", "do", "dfinal_state")]
        grads = ref.kda_backward(*ins, self._t(m, "cu_seqlens", sid, False), **self._kda_opts(m))
        for field, value in zip(("dq", "dk", "dv", "dg", "dbeta", "da_log", "ddt_bias",
                                 "dinitial_state"), grads):
            out = self._t(m, field, sid)
            self._put(out, torch.zeros(out.shape, dtype=torch.float64) if value is None else value)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--backend", default="host", choices=["host"])
    parser.add_argument("--unimplemented", default="", help="families, e.g. mhc,kda")
    args = parser.parse_args()
    torch.set_num_threads(1)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    service_pb2_grpc.add_CakegradServicer_to_server(
        FakeDaemon({f for f in args.unimplemented.split(",") if f}), server)
    server.add_insecure_port("unix:" + args.socket)
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
