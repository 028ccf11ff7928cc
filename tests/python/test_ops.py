"""Every operator through the package against a real daemon (--backend=host), checked
against the float64 PyTorch implementations of SPEC.md (torch_reference.py)."""

from __future__ import annotations

import os

import pytest
import torch

import cakegrad
import torch_reference as ref
from cakegrad.cake_causal_conv1d_train import (
    cake_causal_conv1d_train_backward, cake_causal_conv1d_train_backward_workspace,
    cake_causal_conv1d_train_backward_workspace_bytes, cake_causal_conv1d_train_forward)
from cakegrad.cake_mhc_train import (
    cake_mhc_train_backward_finish, cake_mhc_train_backward_prepare,
    cake_mhc_train_backward_workspace, cake_mhc_train_forward_finish,
    cake_mhc_train_forward_prepare, cake_mhc_train_forward_stats)
from cakegrad.kda_backward import (RecurrentKDABackwardWorkspace, recurrent_kda_backward,
                                   recurrent_kda_forward)
from support import (BF16_TOL, FP32_TOL, PLACEMENTS, assert_close, bf16_ulp, check_kind, place,
                     rand_bf16)
from torch_reference import f64


@pytest.fixture(autouse=True)
def _client(client):
    cakegrad.set_default_client(client)
    return client


# -- causal conv1d -------------------------------------------------------------------------------

CU = [0, 5, 5, 6, 21, 37]  # an empty and a one-token document among others
S, C = CU[-1], 19


def conv_inputs(weight_dtype=torch.float32, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = rand_bf16(S, C, generator=g)
    w = (torch.rand(C, 4, generator=g, dtype=torch.float64) - 0.5).to(weight_dtype)
    b = (torch.rand(C, generator=g, dtype=torch.float64) - 0.5).to(weight_dtype) if bias else None
    dy = rand_bf16(S, C, generator=g)
    return x, w, b, dy


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("cu_dtype", [torch.int32, torch.int64])
def test_conv1d_forward(placement, cu_dtype):
    x, w, b, _ = conv_inputs()
    cu = torch.tensor(CU, dtype=cu_dtype)
    y = cake_causal_conv1d_train_forward(place(x, placement), place(w, placement),
                                         place(cu, placement), place(b, placement))
    check_kind(y, placement)
    exact = ref.conv1d_forward(x, w, cu, b)
    assert tuple(y.shape) == (S, C)
    assert_close("y", y, exact, BF16_TOL)
    # Rounded once from the exact value: within one BF16 ulp everywhere.
    assert ((f64(y) - exact).abs() <= bf16_ulp(exact)).all()


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("policy", ["bf16", "fp32"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("weight_dtype", [torch.float32, torch.bfloat16])
def test_conv1d_backward(placement, policy, bias, weight_dtype):
    x, w, b, dy = conv_inputs(weight_dtype, bias)
    cu = torch.tensor(CU, dtype=torch.int32)
    out = cake_causal_conv1d_train_backward(
        place(x, placement), place(w, placement), place(cu, placement), place(dy, placement),
        bias=place(b, placement), silu_grad_preactivation=policy)
    assert len(out) == (3 if bias else 2)
    for o in out:
        check_kind(o, placement)
    dx, dw = out[0], out[1]
    assert "bfloat16" in str(dx.dtype) and tuple(dx.shape) == (S, C)
    assert str(dw.dtype).endswith(str(weight_dtype).replace("torch.", ""))
    ex_dx, ex_dw, ex_db = ref.conv1d_backward(x, w, cu, dy, b, policy)
    assert_close("dx", dx, ex_dx, 2e-3)
    ulps = 2 if policy == "bf16" else 1
    slack = ref.conv1d_dx_slack(x, w, cu, dy, b, policy)
    assert ((f64(dx) - ex_dx).abs() <= ulps * bf16_ulp(ex_dx) + slack).all()
    param_tol = (1e-4 if policy == "bf16" else 1e-6) if weight_dtype == torch.float32 else BF16_TOL
    assert_close("dweight", dw, ex_dw, param_tol)
    if bias:
        assert_close("dbias", out[2], ex_db, param_tol)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_conv1d_backward_preallocated_outputs_and_workspace(placement):
    x, w, b, dy = conv_inputs()
    cu = torch.tensor(CU, dtype=torch.int64)
    dx = place(torch.full((S, C), 7.0, dtype=torch.bfloat16), placement)
    dw = place(torch.full((C, 4), 7.0), placement)
    db = place(torch.full((C,), 7.0), placement)
    nbytes = cake_causal_conv1d_train_backward_workspace_bytes(S, C)
    assert nbytes >= 0
    device = "numpy" if placement.startswith("numpy") else "cpu"
    ws = cake_causal_conv1d_train_backward_workspace(S, C, device=device)
    assert tuple(ws.shape) == (nbytes,) and cakegrad.is_shared(ws)
    out = cake_causal_conv1d_train_backward(
        place(x, placement), place(w, placement), place(cu, placement), place(dy, placement),
        bias=place(b, placement), workspace=ws, dx=dx, dweight=dw, dbias=db)
    assert out[0] is dx and out[1] is dw and out[2] is db
    ex_dx, ex_dw, ex_db = ref.conv1d_backward(x, w, cu, dy, b, "bf16")
    assert_close("dx", dx, ex_dx, 2e-3)
    assert_close("dweight", dw, ex_dw, 1e-4)
    assert_close("dbias", db, ex_db, 1e-4)


def test_conv1d_empty_sequence():
    x = torch.zeros(0, C, dtype=torch.bfloat16)
    w, b = torch.rand(C, 4), torch.rand(C)
    dx, dw, db = cake_causal_conv1d_train_backward(
        x, w, torch.tensor([0, 0], dtype=torch.int32), x.clone(), bias=b)
    assert tuple(dx.shape) == (0, C)
    assert (dw == 0).all() and (db == 0).all()
    y = cake_causal_conv1d_train_forward(x, w, [0], b)
    assert tuple(y.shape) == (0, C)


# -- mHC -----------------------------------------------------------------------------------------

T_MHC, C_MHC = 6, 256
MHC_OPTS = dict(rms_eps=1e-5, hc_eps=1e-6, sinkhorn_iters=20)


def mhc_inputs(T=T_MHC, seed=1):
    g = torch.Generator().manual_seed(seed)
    X = rand_bf16(T, 4, C_MHC, generator=g)
    fn = (torch.randn(24, 4 * C_MHC, generator=g, dtype=torch.float64) / 32).float()
    scale = torch.tensor([0.7, 1.1, 0.9])
    base = (torch.randn(24, generator=g, dtype=torch.float64) * 0.5).float()
    B = rand_bf16(T, C_MHC, generator=g)
    dY = rand_bf16(T, 4, C_MHC, generator=g)
    dU = rand_bf16(T, C_MHC, generator=g)
    return X, fn, scale, base, B, dY, dU


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_mhc_forward(placement):
    X, fn, scale, base, B, _, _ = mhc_inputs()
    args = [place(t, placement) for t in (X, fn, scale, base)]
    U, stats = cake_mhc_train_forward_prepare(*args, **MHC_OPTS)
    check_kind(U, placement)
    exact = ref.mhc_forward(X, fn, scale, base, B, **MHC_OPTS)
    assert_close("U", U, exact["U"], BF16_TOL)
    assert_close("stats", stats, exact["stats"], FP32_TOL)
    assert (f64(stats)[:, 49:] == 0).all()
    stats2 = cake_mhc_train_forward_stats(*args, **MHC_OPTS)
    assert torch.equal(f64(stats2), f64(stats)), "forward_stats must equal forward_prepare's"
    Y = cake_mhc_train_forward_finish(args[0], place(B, placement), stats)
    assert_close("Y", Y, ref.mhc_forward_finish(X, B, f64(stats)), BF16_TOL)
    assert_close("Y vs forward", Y, exact["Y"], BF16_TOL)


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("accumulate", [False, True])
def test_mhc_backward(placement, accumulate):
    X, fn, scale, base, B, dY, dU = mhc_inputs()
    p = lambda t: place(t, placement)  # noqa: E731
    _, stats = cake_mhc_train_forward_prepare(p(X), p(fn), p(scale), p(base), **MHC_OPTS)
    dB, grad_stats = cake_mhc_train_backward_prepare(p(X), p(dY), p(B), stats)
    ex_dB, ex_gs = ref.mhc_backward_prepare(X, dY, B, f64(stats))
    assert_close("dB", dB, ex_dB, BF16_TOL)
    assert_close("grad_stats", grad_stats, ex_gs, FP32_TOL)
    prior = [torch.randn(24, 4 * C_MHC), torch.randn(3), torch.randn(24)]
    kwargs = {}
    if accumulate:
        kwargs = dict(accumulate=True, dfn=p(prior[0]), dscale=p(prior[1]), dbase=p(prior[2]))
    ws = cake_mhc_train_backward_workspace(T_MHC, C_MHC, device="cpu")
    dX, dfn, dscale, dbase = cake_mhc_train_backward_finish(
        p(X), p(dY), p(dU), p(B), p(fn), p(scale), p(base), stats, grad_stats,
        workspace=ws, **MHC_OPTS, **kwargs)
    check_kind(dX, placement)
    ex = ref.mhc_backward_finish(X, dY, dU, fn, scale, base, f64(stats), f64(grad_stats),
                                 **MHC_OPTS)
    assert_close("dX", dX, ex[0], BF16_TOL)
    for name, got, exact, before in zip(("dfn", "dscale", "dbase"), (dfn, dscale, dbase),
                                        ex[1:], prior):
        assert_close(name, got, exact + (f64(before) if accumulate else 0), FP32_TOL)
    if accumulate:
        assert dfn is kwargs["dfn"]


def test_mhc_backward_matches_autograd_of_the_forward():
    """backward_prepare + backward_finish give the gradient of the float64 forward."""
    X, fn, scale, base, B, dY, dU = mhc_inputs(seed=3)
    U, stats = cake_mhc_train_forward_prepare(X, fn, scale, base)
    dB, grad_stats = cake_mhc_train_backward_prepare(X, dY, B, stats)
    dX, dfn, dscale, dbase = cake_mhc_train_backward_finish(X, dY, dU, B, fn, scale, base,
                                                           stats, grad_stats)
    leaves = [f64(t).requires_grad_() for t in (X, fn, scale, base, B)]
    out = ref.mhc_forward(*leaves[:4], leaves[4])
    loss = (out["U"] * f64(dU)).sum() + (out["Y"] * f64(dY)).sum()
    gX, gfn, gscale, gbase, gB = torch.autograd.grad(loss, leaves)
    assert_close("dX", dX, gX, BF16_TOL)
    assert_close("dB", dB, gB, BF16_TOL)
    for name, got, exact in (("dfn", dfn, gfn), ("dscale", dscale, gscale),
                             ("dbase", dbase, gbase)):
        assert_close(name, got, exact, 1e-4)


def test_mhc_zero_tokens():
    X, fn, scale, base, B, dY, dU = mhc_inputs(T=0)
    U, stats = cake_mhc_train_forward_prepare(X, fn, scale, base)
    assert tuple(U.shape) == (0, C_MHC) and tuple(stats.shape) == (0, 64)
    dB, gs = cake_mhc_train_backward_prepare(X, dY, B, stats)
    dX, dfn, dscale, dbase = cake_mhc_train_backward_finish(X, dY, dU, None, fn, scale, base,
                                                           stats, gs)
    assert tuple(dX.shape) == (0, 4, C_MHC)
    assert (dfn == 0).all() and (dscale == 0).all() and (dbase == 0).all()


# -- KDA -----------------------------------------------------------------------------------------

H_KDA = 2


def kda_inputs(B=1, T=9, N=None, initial_state=True, seed=2):
    g = torch.Generator().manual_seed(seed)
    N = B if N is None else N
    q, k, v = (rand_bf16(B, T, H_KDA, 128, generator=g) for _ in range(3))
    gate = rand_bf16(B, T, H_KDA, 128, generator=g)
    beta = rand_bf16(B, T, H_KDA, generator=g)
    A_log = (torch.rand(H_KDA, generator=g, dtype=torch.float64) * 2).float()
    dt_bias = (torch.randn(H_KDA, 128, generator=g, dtype=torch.float64) * 0.3).float()
    init = (torch.randn(N, H_KDA, 128, 128, generator=g, dtype=torch.float64) * 0.1).float() \
        if initial_state else None
    do = rand_bf16(B, T, H_KDA, 128, generator=g)
    dfinal = (torch.randn(N, H_KDA, 128, 128, generator=g, dtype=torch.float64) * 0.1).float()
    return [q, k, v, gate, beta, A_log, dt_bias], init, do, dfinal


KDA_CASES = {
    "batch2": dict(B=2, T=7, cu=None),
    "packed": dict(B=1, T=11, cu=[0, 4, 4, 5, 11]),  # an empty and a one-token document
}
GRAD_NAMES = ("dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias", "dinitial_state")


@pytest.mark.parametrize("placement", ["torch", "numpy_shared"])
@pytest.mark.parametrize("case", sorted(KDA_CASES))
@pytest.mark.parametrize("with_initial_state", [True, False])
def test_kda_forward(placement, case, with_initial_state):
    c = KDA_CASES[case]
    N = c["B"] if c["cu"] is None else len(c["cu"]) - 1
    ins, init, _, _ = kda_inputs(c["B"], c["T"], N, with_initial_state)
    cu = None if c["cu"] is None else torch.tensor(c["cu"], dtype=torch.int64)
    o, final = recurrent_kda_forward(*[place(t, placement) for t in ins], place(init, placement),
                                     place(cu, placement))
    check_kind(o, placement)
    ex_o, ex_final = ref.kda_forward(*ins, init, cu)
    assert_close("o", o, ex_o, 5e-3)
    assert_close("final_state", final, ex_final, 1e-4)


@pytest.mark.parametrize("placement", ["torch", "torch_shared", "numpy"])
@pytest.mark.parametrize("case", sorted(KDA_CASES))
def test_kda_backward(placement, case):
    c = KDA_CASES[case]
    N = c["B"] if c["cu"] is None else len(c["cu"]) - 1
    ins, init, do, dfinal = kda_inputs(c["B"], c["T"], N)
    cu = None if c["cu"] is None else torch.tensor(c["cu"], dtype=torch.int32)
    p = lambda t: place(t, placement)  # noqa: E731
    ws = RecurrentKDABackwardWorkspace("numpy" if placement == "numpy" else "cpu")
    grads = recurrent_kda_backward(*[p(t) for t in ins], p(init), p(do), p(dfinal), p(cu),
                                   workspace=ws)
    assert len(grads) == 8
    exact = ref.kda_backward(*ins, init, do, dfinal, cu)
    for name, got, ex in zip(GRAD_NAMES, grads, exact):
        check_kind(got, placement)
        assert_close(name, got, ex, 5e-3 if "bfloat16" in str(got.dtype) else 1e-4)


def test_kda_backward_preallocated_and_default_states():
    ins, _, do, _ = kda_inputs(B=1, T=5)
    out = [torch.empty_like(ins[0]) for _ in range(4)] + [
        torch.empty_like(ins[4]), torch.empty_like(ins[5]), torch.empty_like(ins[6]),
        torch.empty(1, H_KDA, 128, 128)]
    grads = recurrent_kda_backward(*ins, None, do, None, out=out)
    assert all(a is b for a, b in zip(grads, out))
    exact = ref.kda_backward(*ins, None, do, None)
    for name, got, ex in zip(GRAD_NAMES, grads, exact):
        assert_close(name, got, ex, 5e-3 if got.dtype == torch.bfloat16 else 1e-4)


# -- errors the caller can act on ----------------------------------------------------------------

needs_real_daemon = pytest.mark.skipif(os.environ.get("CAKEGRAD_DAEMON") == "fake",
                                       reason="the fake daemon does not validate arguments")


@needs_real_daemon
def test_wrong_dtype_is_invalid_argument_naming_the_argument():
    x, w, b, dy = conv_inputs()
    with pytest.raises(cakegrad.InvalidArgumentError) as err:
        cake_causal_conv1d_train_backward(x.float(), w, [0, S], dy)
    assert err.value.code_name == "INVALID_ARGUMENT"
    assert "x" in err.value.message


@needs_real_daemon
def test_wrong_shape_is_invalid_argument():
    x, w, b, dy = conv_inputs()
    with pytest.raises(cakegrad.InvalidArgumentError) as err:
        cake_causal_conv1d_train_backward(x, w, [0, S], dy[:-1].contiguous())
    assert "dy" in err.value.message


def test_unsupported_dtype_and_layout_are_rejected_before_sending():
    x, w, b, dy = conv_inputs()
    with pytest.raises(cakegrad.InvalidArgumentError, match="float64 is not supported"):
        cake_causal_conv1d_train_forward(x.double(), w, [0, S])
    with pytest.raises(cakegrad.InvalidArgumentError, match="contiguous"):
        cake_causal_conv1d_train_forward(torch.zeros(C, S, dtype=torch.bfloat16).t(), w, [0, S])
    with pytest.raises(cakegrad.InvalidArgumentError, match="silu_grad_preactivation"):
        cake_causal_conv1d_train_backward(x, w, [0, S], dy, silu_grad_preactivation="fp16")
    with pytest.raises(cakegrad.InvalidArgumentError, match="dbias"):
        cake_causal_conv1d_train_backward(x, w, [0, S], dy, dbias=torch.zeros(C))
    with pytest.raises(cakegrad.InvalidArgumentError, match="expected a torch.Tensor"):
        cake_causal_conv1d_train_forward([[1.0]], w, [0, S])
    X = mhc_inputs()[0]
    with pytest.raises(cakegrad.InvalidArgumentError, match=r"'X'.*\[T, 4, C\]"):
        cake_mhc_train_forward_prepare(X[0], *mhc_inputs()[1:4])
    with pytest.raises(cakegrad.InvalidArgumentError, match="accumulate=True needs"):
        cake_mhc_train_backward_finish(*mhc_inputs()[:1], None, None, None, None, None, None,
                                       None, None, accumulate=True)


def test_bad_cu_seqlens_is_rejected_by_the_daemon():
    x, w, b, dy = conv_inputs()
    with pytest.raises(cakegrad.InvalidArgumentError):
        # cu_seqlens[N] must equal S.
        cake_causal_conv1d_train_forward(x, w, [0, 3, S + 5], b)
