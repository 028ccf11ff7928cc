// Forward of the causal depthwise conv1d (width 4) + SiLU: y = bf16(silu(pre)), one launch.
// Memory-bound (x read once, y written once): each thread streams one segment of tokens of
// V channels with a 4-token x window in registers and loads four tokens ahead.
#include <climits>

#include "conv1d_common.cuh"

namespace cakegrad::kernels {
namespace conv1d {
namespace {

// One thread's walk over its segment (see the kernel). Step i handles token r = s0 - 3 + i: it
// loads the token of step i + 4 (at xn), pushes x[r] into the window and, for i >= 3, writes
// y[r] at yo. `lim`: steps whose token exists. kBoundaries: whether a document starts inside
// the segment's window (rare with long documents); only then does a start zero the older slots
// of the window, which drops the terms before the document from every later token's sum.
template <int V, bool kBoundaries>
__device__ __forceinline__ void FwdWalk(const uint32_t* marks, int mbase, int lim, int64_t C,
                                        const uint16_t* xn, uint16_t* yo, RawT<V> (&xr)[4],
                                        const float (&w)[kConv1dWidth][V], const float (&b)[V]) {
  constexpr int kSteps = FwdTraits::kSegLen + kHalo;
  float xw[4][V] = {};  // xw[i & 3] = x[r]
  // Not unrolled further: one 4-step body indexes the window with constants (registers).
#pragma unroll 1
  for (int g = 0; g < kSteps; g += 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = g + j;
      float xc[V];
      Unpack<V>(xr[j], xc);
      xr[j] = i + 4 < lim ? LoadRaw<V>(xn) : ZeroRaw<V>();
      xn += C;
      if (i >= lim) continue;
      if constexpr (kBoundaries) {
        if (MarkAt(marks, mbase + i)) {
#pragma unroll
          for (int v = 0; v < V; ++v) {
            xw[(j + 1) & 3][v] = 0.0f;
            xw[(j + 2) & 3][v] = 0.0f;
            xw[(j + 3) & 3][v] = 0.0f;
          }
        }
      }
#pragma unroll
      for (int v = 0; v < V; ++v) xw[j][v] = xc[v];
      if (i < kHalo) continue;
      float y[V];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        // pre = b + w0 x[r-3] + w1 x[r-2] + w2 x[r-1] + w3 x[r], in this order.
        float pre = __fmaf_rn(w[0][v], xw[(j + 1) & 3][v], b[v]);
        pre = __fmaf_rn(w[1][v], xw[(j + 2) & 3][v], pre);
        pre = __fmaf_rn(w[2][v], xw[(j + 3) & 3][v], pre);
        pre = __fmaf_rn(w[3][v], xw[j][v], pre);
        // A few FP32 ulps, far below y's one BF16 rounding.
        y[v] = __fmul_rn(pre, SigmoidFast(pre));
      }
      StoreRaw<V>(yo, Pack<V>(y));
      yo += C;
    }
  }
}

template <int V>
__global__ void __launch_bounds__(FwdTraits::kThreads, 2)
    Conv1dFwdKernel(const __grid_constant__ Conv1dFwdParams p, const Tiling tl) {
  using Tr = FwdTraits;
  constexpr int L = Tr::kSegLen;
  constexpr int kSteps = L + kHalo;  // kHalo tokens of x history, then L outputs
  __shared__ uint32_t marks[Tr::kMarkWords];

  const bool cu64 = p.seqlens_dtype == DType::kINT64;
  CheckCuSeqlens(p.cu_seqlens, cu64, p.num_docs, p.S, p.device_status);

  const int tid = static_cast<int>(threadIdx.x);
  const int vi = tid & (tl.vx - 1);
  const int si = tid >> tl.vx_log2;
  const int64_t ctile = blockIdx.x % tl.num_ctiles;
  const int64_t ttile = blockIdx.x / tl.num_ctiles;
  const int64_t C = p.C, S = p.S;
  const int64_t c0 = (ctile * tl.vx + vi) * V;
  const int64_t t_tile = ttile * tl.tile_tokens;
  const int64_t s0 = t_tile + static_cast<int64_t>(si) * L;
  const bool run = c0 < C && s0 < S;
  // Tokens from s0 - kHalo on that exist (capped: only the comparison with step counts matters).
  const int avail = static_cast<int>(S - (s0 - kHalo) < kSteps ? S - (s0 - kHalo) : kSteps);

  // The first loads go out before the document search so that their latency overlaps it.
  RawT<V> xr[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t r = s0 - kHalo + j;
    xr[j] = (run && r >= 0 && j < avail) ? LoadRaw<V>(p.x + r * C + c0) : ZeroRaw<V>();
  }
  MarkDocStarts<Tr::kThreads, Tr::kMarkWords>(p.cu_seqlens, cu64, p.num_docs, t_tile - kHalo,
                                              tl.tile_tokens + 2 * kHalo, marks);
  if (!run) return;

  float w[kConv1dWidth][V], b[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
#pragma unroll
    for (int k = 0; k < kConv1dWidth; ++k) {
      w[k][v] = LoadParam(p.weight, p.weight_dtype, (c0 + v) * kConv1dWidth + k);
    }
    b[v] = p.bias != nullptr ? LoadParam(p.bias, p.bias_dtype, c0 + v) : 0.0f;
  }
  const int mbase = si * L;
  const uint16_t* xn = p.x + (s0 + 1) * C + c0;  // the token of step 4
  uint16_t* yo = p.y + s0 * C + c0;              // the y row of step 3
  if (AnyMark(marks, mbase + 1, kSteps - 1)) {
    FwdWalk<V, true>(marks, mbase, avail, C, xn, yo, xr, w, b);
  } else {
    FwdWalk<V, false>(marks, mbase, avail, C, xn, yo, xr, w, b);
  }
}

}  // namespace
}  // namespace conv1d

Status Conv1dForwardCuda(const Conv1dFwdParams& p, cudaStream_t stream) {
  Status s = conv1d::CheckCommonArgs(p.S, p.C, p.num_docs, p.x, p.weight, p.weight_dtype, p.bias,
                                     p.bias_dtype, p.cu_seqlens, p.seqlens_dtype);
  if (!s.ok()) return s;
  if (p.S == 0) return OkStatus();
  if (p.y == nullptr) return InvalidArgument("conv1d: y must be non-null when S > 0");
  return conv1d::DispatchVec(conv1d::ChooseVec(p.C, p.x, p.y, p.x), [&](auto vec) -> Status {
    constexpr int V = decltype(vec)::value;
    const conv1d::Tiling tl = conv1d::MakeTiling<conv1d::FwdTraits>(p.S, p.C, V);
    const int64_t blocks = tl.num_ctiles * tl.num_ttiles;
    if (blocks > INT_MAX) {
      return InvalidArgument("conv1d: S * C too large for one forward launch");
    }
    conv1d::Conv1dFwdKernel<V>
        <<<static_cast<unsigned>(blocks), conv1d::FwdTraits::kThreads, 0, stream>>>(p, tl);
    return conv1d::CudaStatus(cudaGetLastError(), "forward kernel launch");
  });
}

}  // namespace cakegrad::kernels
