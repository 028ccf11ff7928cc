// Forward of the causal depthwise conv1d (width 4) + SiLU: y = bf16(silu(pre)), one launch.
// Memory-bound (x read once, y written once): each thread streams one segment of tokens of
// V channels with a 4-token x window in registers and loads four tokens ahead.
#include <climits>

#include "conv1d_common.cuh"

namespace cakegrad::kernels {
namespace conv1d {
namespace {

// One thread's walk over its segment (see the kernel). Step i handles token r = s0 - 3 + i: it
// asks the ring for the token of step i + kAhead (at xn), pushes x[r] into the window and, for
// i >= 3, writes y[r] at yo. `lim`: steps whose token exists. kBoundaries: whether a document
// starts inside the segment's window (rare with long documents); only then does a start zero
// the older slots of the window, which drops the terms before the document from every later
// token's sum.
template <int V, class Ring, bool kBoundaries>
__device__ __forceinline__ void FwdWalk(const uint32_t* marks, int mbase, int lim, int64_t C,
                                        const uint16_t* xn, const uint16_t* x_safe, uint16_t* yo,
                                        Ring& xr, const float (&w)[kConv1dWidth][V],
                                        const float (&b)[V]) {
  constexpr int kSteps = FwdTraits::kSegLen + kHalo;
  constexpr int U = Ring::kUnroll;
  constexpr int D = Ring::kAhead;
  constexpr int R = Ring::kSlots;
  float xw[4][V] = {};  // xw[i & 3] = x[r]
  // Not unrolled further: one U-step body indexes the window and ring slots with constants.
#pragma unroll 1
  for (int g = 0; g < kSteps; g += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = g + u;
      const int j = u & 3;
      float xc[V];
      RingWait<Ring>();
      Unpack<V>(xr.Get(u % R), xc);
      xr.Issue((u + D) % R, xn, i + D < lim, x_safe);
      RingCommit<Ring>();
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

template <int V, class Ring, int kMinBlocks>
__global__ void __launch_bounds__(FwdTraits::kThreads, kMinBlocks)
    Conv1dFwdKernel(const __grid_constant__ Conv1dFwdParams p, const Tiling tl) {
  using Tr = FwdTraits;
  constexpr int L = Tr::kSegLen;
  constexpr int kSteps = L + kHalo;  // kHalo tokens of x history, then L outputs
  constexpr int D = Ring::kAhead;
  __shared__ uint32_t marks[Tr::kMarkWords];
  extern __shared__ __align__(16) unsigned char smem[];

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

  // The first kAhead tokens go out before the document search so that their latency overlaps
  // it.
  Ring xr;
  xr.Init(smem, tid);
  const uint16_t* x_safe = p.x;  // a valid address for the zero-filling copies
#pragma unroll
  for (int j = 0; j < D; ++j) {
    const int64_t r = s0 - kHalo + j;
    xr.Issue(j, p.x + (r >= 0 ? r : 0) * C + c0, run && r >= 0 && j < avail, x_safe);
    RingCommit<Ring>();
  }
  float w[kConv1dWidth][V], b[V];
  LoadChannelParams<V>(p.weight, p.weight_dtype, p.bias, p.bias_dtype, c0, run, w, b);
  MarkDocStarts<Tr::kThreads>(p.cu_seqlens, cu64, p.num_docs, t_tile - kHalo,
                              tl.tile_tokens + 2 * kHalo, marks, Tr::kMarkWords);
  if (run) {
    const int mbase = si * L;
    const uint16_t* xn = p.x + (s0 - kHalo + D) * C + c0;  // the token of step kAhead
    uint16_t* yo = p.y + s0 * C + c0;                      // the y row of step 3
    if (AnyMark(marks, mbase + 1, kSteps - 1)) {
      FwdWalk<V, Ring, true>(marks, mbase, avail, C, xn, x_safe, yo, xr, w, b);
    } else {
      FwdWalk<V, Ring, false>(marks, mbase, avail, C, xn, x_safe, yo, xr, w, b);
    }
  }
  // No copy may still be writing shared memory when the CTA exits.
  RingDrain<Ring>();
}

template <int V, class Ring, int kMinBlocks>
Status LaunchForward(const Conv1dFwdParams& p, cudaStream_t stream) {
  const Tiling tl = MakeTiling<FwdTraits>(p.S, p.C, V);
  const int64_t blocks = tl.num_ctiles * tl.num_ttiles;
  if (blocks > INT_MAX) return InvalidArgument("conv1d: S * C too large for one forward launch");
  constexpr int kSmem = Ring::kSmemBytes;
  auto* kernel = Conv1dFwdKernel<V, Ring, kMinBlocks>;
  if constexpr (kSmem > 40 * 1024) {  // beyond the default 48 KB with the static part
    // Per call (not once): the attribute belongs to the device current now.
    Status a =
        CudaStatus(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
                   "forward kernel shared memory");
    if (!a.ok()) return a;
  }
  kernel<<<static_cast<unsigned>(blocks), FwdTraits::kThreads, kSmem, stream>>>(p, tl);
  return CudaStatus(cudaGetLastError(), "forward kernel launch");
}

}  // namespace
}  // namespace conv1d

Status Conv1dForwardCuda(const Conv1dFwdParams& p, cudaStream_t stream) {
  using namespace conv1d;  // NOLINT(build/namespaces): the family's internals, in one function
  Status s = CheckCommonArgs(p.S, p.C, p.num_docs, p.x, p.weight, p.weight_dtype, p.bias,
                             p.bias_dtype, p.cu_seqlens, p.seqlens_dtype);
  if (!s.ok()) return s;
  if (p.S == 0) return OkStatus();
  if (p.y == nullptr) return InvalidArgument("conv1d: y must be non-null when S > 0");
  constexpr int T = FwdTraits::kThreads;
  constexpr int kFwdCtasPerSm = 6;  // 24 warps per SM, as many as 80 registers allow
  // The 16-byte route runs the 8-byte kernel too: at 80 registers, 24 warps per SM keep more
  // loads in flight than eight channels per thread at 128 registers (16 warps); on the H200 it
  // measured 1.1-1.25x faster, with the same output bits.
  switch (ChooseVec(p.C, p.x, p.y, p.x)) {
    case 8:
    case 4:
      return LaunchForward<4, SmemRing<4, 8, T>, kFwdCtasPerSm>(p, stream);
    case 2:
      return LaunchForward<2, SmemRing<2, 8, T>, kFwdCtasPerSm>(p, stream);
    case 1:
      return LaunchForward<1, RegRing<1, 4>, kFwdCtasPerSm>(p, stream);
    default:
      return Internal("conv1d: unsupported vector width");
  }
}

}  // namespace cakegrad::kernels
