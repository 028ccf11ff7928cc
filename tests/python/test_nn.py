"""cakegrad.nn's autograd modules against float64 autograd of SPEC's forwards."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import cakegrad
import cakegrad.nn as cnn
import torch_reference as ref
from support import assert_close, rand_bf16
from torch_reference import f64


@pytest.fixture(autouse=True)
def _client(client):
    cakegrad.set_default_client(client)
    torch.manual_seed(0)
    return client


def _grad_target(shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_short_convolution_packed():
    C, cu = 24, torch.tensor([0, 3, 3, 17, 30], dtype=torch.int32)
    conv = cnn.ShortConvolution(C, bias=True)
    x = rand_bf16(30, C).requires_grad_()
    y = conv(x, cu)
    assert y.dtype == torch.bfloat16 and y.shape == (30, C)
    w_out = _grad_target(y.shape, 1)
    (y.float() * w_out).sum().backward()

    x64, w64, b64 = (f64(t).requires_grad_() for t in (x, conv.weight, conv.bias))
    y64 = torch.nn.functional.silu(ref.conv1d_preactivation(x64, w64, cu, b64))
    assert_close("y", y, y64, 4e-3)
    # The upstream gradient reaches the module rounded to BF16 (y's dtype).
    dy = w_out.bfloat16()
    (y64 * f64(dy)).sum().backward()
    # Against the exact gradient: SiLU' at the BF16-rounded preactivation moves it a little.
    for name, got, exact in (("x", x.grad, x64.grad), ("weight", conv.weight.grad, w64.grad),
                             ("bias", conv.bias.grad, b64.grad)):
        assert_close(name, got, exact, 1e-2)
    # Against SPEC's "bf16" policy: its tolerances.
    ex_dx, ex_dw, ex_db = ref.conv1d_backward(x, conv.weight, cu, dy, conv.bias, "bf16")
    assert_close("x.grad", x.grad, ex_dx, 2e-3)
    assert_close("weight.grad", conv.weight.grad, ex_dw, 1e-4)
    assert_close("bias.grad", conv.bias.grad, ex_db, 1e-4)


def test_short_convolution_batch():
    B, T, C = 3, 10, 8
    conv = cnn.ShortConvolution(C, silu_grad_preactivation="fp32")
    x = rand_bf16(B, T, C).requires_grad_()
    y = conv(x)
    assert y.shape == (B, T, C)
    y.float().sum().backward()
    x64, w64 = f64(x).requires_grad_(), f64(conv.weight).requires_grad_()
    cu = torch.arange(0, B * T + 1, T)
    ref_y = torch.nn.functional.silu(ref.conv1d_preactivation(x64.reshape(-1, C), w64, cu))
    ref_y.sum().backward()
    assert_close("x.grad", x.grad, x64.grad, 4e-3)
    assert_close("weight.grad", conv.weight.grad, w64.grad, 1e-6)
    assert conv.bias is None


def test_kda_core():
    H, T = 2, 8
    core = cnn.KDACore(H)
    cu = torch.tensor([0, 3, 8], dtype=torch.int64)
    qkvg = [rand_bf16(1, T, H, 128).requires_grad_() for _ in range(4)]
    beta = rand_bf16(1, T, H).requires_grad_()
    init = (torch.randn(2, H, 128, 128) * 0.1).requires_grad_()
    o, final = core(*qkvg, beta, initial_state=init, cu_seqlens=cu, output_final_state=True)
    w_o, w_f = _grad_target(o.shape, 2), _grad_target(final.shape, 3)
    ((o.float() * w_o).sum() + (final * w_f).sum()).backward()

    leaves = [f64(t).requires_grad_() for t in (*qkvg, beta, core.A_log, core.dt_bias, init)]
    o64, f64_ = ref.kda_forward(*leaves[:7], leaves[7], cu)
    ((o64 * w_o.bfloat16().double()).sum() + (f64_ * w_f.double()).sum()).backward()
    got = [*(t.grad for t in qkvg), beta.grad, core.A_log.grad, core.dt_bias.grad, init.grad]
    for name, g, leaf in zip(("q", "k", "v", "g", "beta", "A_log", "dt_bias", "initial_state"),
                             got, leaves):
        assert_close(name, g, leaf.grad, 5e-3 if g.dtype == torch.bfloat16 else 1e-4)


def test_kda_core_without_final_state():
    core = cnn.KDACore(1)
    q, k, v, g = (rand_bf16(2, 5, 1, 128).requires_grad_() for _ in range(4))
    beta = rand_bf16(2, 5, 1).requires_grad_()
    core(q, k, v, g, beta).float().sum().backward()
    leaves = [f64(t).requires_grad_() for t in (q, k, v, g, beta, core.A_log, core.dt_bias)]
    ref.kda_forward(*leaves)[0].sum().backward()
    assert_close("A_log", core.A_log.grad, leaves[5].grad, 1e-4)
    assert_close("q", q.grad, leaves[0].grad, 5e-3)


class _Linear64(nn.Module):
    """The branch: a linear map computed in BF16 by torch (the reference redoes it in
    float64 with the same weights)."""

    def __init__(self, C):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(C, C) / C ** 0.5)

    def forward(self, U):
        return U @ self.weight.to(U.dtype).t()


def test_mhc_block():
    T, C = 5, 256
    branch = _Linear64(C)
    block = cnn.MHCBlock(branch, C)
    with torch.no_grad():
        block.base.add_(torch.randn(24) * 0.3)
    X = rand_bf16(T, 4, C).requires_grad_()
    Y = block(X)
    assert Y.shape == (T, 4, C) and Y.dtype == torch.bfloat16
    w_out = _grad_target(Y.shape, 4)
    (Y.float() * w_out).sum().backward()

    X64, fn64, sc64, b64, W64 = (f64(t).requires_grad_() for t in
                                 (X, block.fn, block.scale, block.base, branch.weight))
    U64 = ref.mhc_forward(X64, fn64, sc64, b64)["U"]
    Y64 = ref.mhc_forward(X64, fn64, sc64, b64, U64 @ W64.t())["Y"]
    (Y64 * w_out.bfloat16().double()).sum().backward()
    # The module rounds U, the branch output, Y and the gradients to BF16 along the way.
    for name, got, exact in (("X", X.grad, X64.grad), ("fn", block.fn.grad, fn64.grad),
                             ("scale", block.scale.grad, sc64.grad),
                             ("base", block.base.grad, b64.grad),
                             ("branch", branch.weight.grad, W64.grad)):
        assert_close(name, got, exact, 2e-2)


class TinyModel(nn.Module):
    """All three modules: an mHC block whose branch is conv -> projections -> KDA -> out."""

    def __init__(self, C=256, H=2):
        super().__init__()
        self.C, self.H = C, H
        self.block = cnn.MHCBlock(_Branch(C, H), C)

    def forward(self, X, cu_seqlens):
        return self.block(X, cu_seqlens)


class _Branch(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.conv = cnn.ShortConvolution(C, bias=True)
        self.proj = nn.Linear(C, 4 * H * 128 + H, bias=False)
        self.kda = cnn.KDACore(H)
        self.out = nn.Linear(H * 128, C, bias=False)

    def forward(self, U, cu_seqlens):
        T, H = U.shape[0], self.H
        h = self.conv(U, cu_seqlens)
        p = h.float() @ self.proj.weight.t()
        q, k, v, g = p[:, :4 * H * 128].reshape(T, 4, H, 128).unbind(1)
        beta = p[:, 4 * H * 128:]
        o = self.kda(q[None], k[None], v[None], g[None], beta[None], cu_seqlens=cu_seqlens)
        return o.reshape(T, H * 128).float() @ self.out.weight.t()


def test_model_with_all_three_modules_trains():
    torch.manual_seed(5)
    model = TinyModel()
    cu = torch.tensor([0, 6, 13], dtype=torch.int32)
    X = rand_bf16(13, 4, 256)
    target = rand_bf16(13, 4, 256)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = ((model(X, cu).float() - target.float()) ** 2).mean()
        loss.backward()
        for name, p in model.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


def test_modules_bring_their_own_workspaces(monkeypatch):
    """Every module call whose operator takes a workspace passes one large enough for its
    shapes, so that no module depends on the daemon's --workspace_bytes."""
    from cakegrad._call import Call

    sent = {}
    original = Call.set

    def spy(self, message, field, x, **kwargs):
        if field == "workspace":
            sent[self.operator] = None if x is None else int(x.shape[0])
        return original(self, message, field, x, **kwargs)

    monkeypatch.setattr(Call, "set", spy)
    test_model_with_all_three_modules_trains()
    client = cakegrad.get_client()
    need = {"conv1d_backward": dict(tokens=13, channels=256),
            "mhc_backward_finish": dict(tokens=13, channels=256),
            "kda_forward": dict(tokens=13, heads=2, batch=1, num_docs=2),
            "kda_backward": dict(tokens=13, heads=2, batch=1, num_docs=2)}
    for operator, dims in need.items():
        nbytes = client.workspace_size(operator, **dims)
        assert nbytes > 0, operator
        assert sent.get(operator) is not None, f"{operator} got no workspace"
        assert sent[operator] >= nbytes, (operator, sent[operator], nbytes)


def test_shared_workspace_is_reused_grown_and_per_thread():
    import threading

    from cakegrad._workspace import shared_workspace

    client = cakegrad.get_client()
    like = torch.empty(1)
    small = dict(tokens=64, heads=2, batch=1, num_docs=0)
    large = dict(tokens=4096, heads=4, batch=1, num_docs=0)
    need_small = client.workspace_size("kda_backward", **small)
    need_large = client.workspace_size("kda_backward", **large)
    assert 0 < need_small < need_large
    a = shared_workspace(client, "kda_backward", like, **small)
    assert a.dtype == torch.uint8 and a.shape[0] >= need_small
    assert shared_workspace(client, "kda_backward", like, **small) is a
    b = shared_workspace(client, "kda_backward", like, **large)
    assert b.shape[0] >= need_large and b is not a
    # A smaller call keeps the grown buffer instead of shrinking it.
    assert shared_workspace(client, "kda_backward", like, **small) is b
    other = []
    t = threading.Thread(target=lambda: other.append(
        shared_workspace(client, "kda_backward", like, **small)))
    t.start()
    t.join()
    assert other[0] is not b and other[0].shape[0] >= need_small
