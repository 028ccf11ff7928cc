// Forward of the causal depthwise conv1d (width 4) + SiLU: y = bf16(silu(pre)), one launch.
// Memory-bound (x read once, y written once): each thread streams one segment of tokens of
// V channels with a 4-token x window in registers and loads four tokens ahead.
#include <climits>
#include <cstdlib>

#include "conv1d_common.cuh"

namespace cakegrad::kernels {
namespace conv1d {
namespace {

// One thread's walk over its segment of L tokens (see the kernel). Step i handles token
// r = s0 - 3 + i: it asks the ring for the token of step i + kAhead (at xn), pushes x[r] into
// the window and, for i >= 3, writes y[r] at yo. `lim`: steps whose token exists. kBoundaries:
// whether a document starts inside the segment's window (rare with long documents); only then
// does a start zero the older slots of the window, which drops the terms before the document
// from every later token's sum.
template <int V, class Ring, int L, bool kBoundaries>
struct FwdWalker {
  static constexpr int kSteps = L + kHalo;
  static constexpr int U = Ring::kUnroll;
  static constexpr int D = Ring::kAhead;
  static constexpr int R = Ring::kSlots;
  // The head blocks [0, kBodyStart) hold the halo steps; steps [kBodyStart, kBodyEnd) of a full
  // segment all ask for a token and write y.
  static constexpr int kBodyStart = (kHalo + U - 1) / U * U;
  static constexpr int kBodyEnd = kBodyStart + (kSteps - D - kBodyStart) / U * U;
  static_assert(kBodyEnd > kBodyStart, "a segment needs at least one body block");

  const uint32_t* marks;
  int mbase, lim;
  int64_t C;
  const uint16_t *xn, *x_safe;
  uint16_t* yo;
  Ring& xr;
  const float (&w)[kConv1dWidth][V];
  const float (&b)[V];
  float xw[4][V] = {};  // xw[i & 3] = x[r]

  // Step i in ring slot u % R (u = i mod U, a constant). kUniform: the caller guarantees
  // kHalo <= i and i + D < lim, so no step-class test is left.
  template <bool kUniform>
  __device__ __forceinline__ void Step(int i, int u) {
    const int j = u & 3;
    float xc[V];
    RingWait<Ring>();
    Unpack<V>(xr.Get(u % R), xc);
    if (kUniform) {
      xr.IssueValid((u + D) % R, xn);
    } else {
      xr.Issue((u + D) % R, xn, i + D < lim, x_safe);
    }
    RingCommit<Ring>();
    xn += C;
    if (!kUniform && i >= lim) return;
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
    if (!kUniform && i < kHalo) return;
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

  // Any segment: every step tests its class at run time.
  __device__ __forceinline__ void WalkChecked() {
    // Not unrolled further: one U-step body indexes the window and ring slots with constants.
#pragma unroll 1
    for (int g = 0; g < kSteps; g += U) {
#pragma unroll
      for (int u = 0; u < U; ++u) Step<false>(g + u, u);
    }
  }

  // A full segment (lim = kSteps) with no document start: head and tail blocks unrolled with
  // constant step numbers (their tests fold away), body blocks without tests.
  __device__ __forceinline__ void WalkFull() {
#pragma unroll
    for (int g = 0; g < kBodyStart; g += U) {
#pragma unroll
      for (int u = 0; u < U; ++u) Step<false>(g + u, u);
    }
#pragma unroll 1
    for (int g = kBodyStart; g < kBodyEnd; g += U) {
#pragma unroll
      for (int u = 0; u < U; ++u) Step<true>(g + u, u);
    }
#pragma unroll
    for (int g = kBodyEnd; g < kSteps; g += U) {
#pragma unroll
      for (int u = 0; u < U; ++u) Step<false>(g + u, u);
    }
  }
};

template <int V, class Ring, class Tr, int kMinBlocks, bool kFast>
__global__ void __launch_bounds__(Tr::kThreads, kMinBlocks)
    Conv1dFwdKernel(const __grid_constant__ Conv1dFwdParams p, const Tiling tl) {
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
  MarkDocStarts<Tr::kThreads, Tr::kMarkWords>(p.cu_seqlens, cu64, p.num_docs, t_tile - kHalo,
                                              tl.tile_tokens + 2 * kHalo, marks);
  if (run) {
    const int mbase = si * L;
    const uint16_t* xn = p.x + (s0 - kHalo + D) * C + c0;  // the token of step kAhead
    uint16_t* yo = p.y + s0 * C + c0;                      // the y row of step 3
    if (AnyMark(marks, mbase + 1, kSteps - 1)) {
      FwdWalker<V, Ring, L, true> wk{marks, mbase, avail, C, xn, x_safe, yo, xr, w, b};
      wk.WalkChecked();
    } else if (kFast && avail == kSteps) {
      // A constant lim, so that WalkFull's head and tail tests fold.
      FwdWalker<V, Ring, L, false> wk{marks, mbase, kSteps, C, xn, x_safe, yo, xr, w, b};
      wk.WalkFull();
    } else {
      FwdWalker<V, Ring, L, false> wk{marks, mbase, avail, C, xn, x_safe, yo, xr, w, b};
      wk.WalkChecked();
    }
  }
  // No copy may still be writing shared memory when the CTA exits.
  RingDrain<Ring>();
}

template <int V, class Ring, class Tr, int kMinBlocks>
Status LaunchForward(const Conv1dFwdParams& p, cudaStream_t stream) {
  const Tiling tl = MakeTiling<Tr>(p.S, p.C, V);
  const int64_t blocks = tl.num_ctiles * tl.num_ttiles;
  if (blocks > INT_MAX) return InvalidArgument("conv1d: S * C too large for one forward launch");
  constexpr int kSmem = Ring::kSmemBytes;
  const char* fe = std::getenv("CONV1D_FAST");  // SCRATCH A/B switch
  auto* kernel = (fe != nullptr && fe[0] == '0') ? Conv1dFwdKernel<V, Ring, Tr, kMinBlocks, false>
                                                  : Conv1dFwdKernel<V, Ring, Tr, kMinBlocks, true>;
  if constexpr (kSmem > 40 * 1024) {  // beyond the default 48 KB with the static part
    // Per call (not once): the attribute belongs to the device current now.
    Status a =
        CudaStatus(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
                   "forward kernel shared memory");
    if (!a.ok()) return a;
  }
  kernel<<<static_cast<unsigned>(blocks), Tr::kThreads, kSmem, stream>>>(p, tl);
  return CudaStatus(cudaGetLastError(), "forward kernel launch");
}

// CTAs of one forward kernel resident per SM (its __launch_bounds__ minimum; 80 registers and
// 24 KB of ring leave room for no fourth).
constexpr int kFwdCtasPerSm = 3;
// The segment lengths the main route can run, longest first.
constexpr int kFwdSegLens[] = {64, 56, 48};
// A CTA's start (document search, parameter loads, the ring's first round trip) in steps.
constexpr int kFwdStartSteps = 8;

// The segment length with the least estimated time, waves x (steps per segment + start):
// with few waves the last, partial one costs a whole CTA lifetime (32768 x 4096 on the H200:
// 5.2 waves of 64-token segments, 6.0 of 56-token ones).
int ChooseFwdSegLen(int64_t S, int64_t C, int vec, int64_t slots) {
  int best = kFwdSegLens[0];
  int64_t best_cost = -1;
  for (const int L : kFwdSegLens) {
    const Tiling tl =
        MakeTiling<FwdTraitsL<64>>(S, C, vec);  // vx and segs do not depend on the length
    const int64_t tile_tokens = static_cast<int64_t>(tl.segs) * L;
    const int64_t blocks = tl.num_ctiles * ((S + tile_tokens - 1) / tile_tokens);
    const int64_t cost = (blocks + slots - 1) / slots * (L + kHalo + kFwdStartSteps);
    if (best_cost < 0 || cost < best_cost) {
      best = L;
      best_cost = cost;
    }
  }
  const char* fl = std::getenv("CONV1D_FWD_SEGLEN");  // SCRATCH A/B switch
  if (fl != nullptr && std::atoi(fl) > 0) best = std::atoi(fl);
  return best;
}

// Turns the segment length into a template constant; the default branch names the value.
template <typename F>
Status DispatchFwdSegLen(int seg_len, F&& f) {
  switch (seg_len) {
    case 64:
      return f(std::integral_constant<int, 64>{});
    case 56:
      return f(std::integral_constant<int, 56>{});
    case 48:
      return f(std::integral_constant<int, 48>{});
    default:
      return Internal("conv1d: unsupported forward segment length " + std::to_string(seg_len));
  }
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
  // The 16-byte route runs the 8-byte kernel too: at 80 registers, three CTAs (24 warps) per SM
  // keep more loads in flight than eight channels per thread at 128 registers (16 warps); on the
  // H200 it measured 1.1-1.25x faster, with the same output bits.
  switch (ChooseVec(p.C, p.x, p.y, p.x)) {
    case 8:
    case 4: {
      int dev = 0, sms = 0;
      const Status d = CudaStatus(cudaGetDevice(&dev), "forward device query");
      if (!d.ok()) return d;
      const Status n = CudaStatus(
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "forward SM count");
      if (!n.ok()) return n;
      const int seg_len = ChooseFwdSegLen(p.S, p.C, 4, static_cast<int64_t>(sms) * kFwdCtasPerSm);
      return DispatchFwdSegLen(seg_len, [&](auto len) -> Status {
        return LaunchForward<4, SmemRing<4, 8, T>, FwdTraitsL<decltype(len)::value>,
                             kFwdCtasPerSm>(p, stream);
      });
    }
    case 2:
      return LaunchForward<2, SmemRing<2, 8, T>, FwdTraits, kFwdCtasPerSm>(p, stream);
    case 1:
      return LaunchForward<1, RegRing<1, 4>, FwdTraits, kFwdCtasPerSm>(p, stream);
    default:
      return Internal("conv1d: unsupported vector width");
  }
}

}  // namespace cakegrad::kernels
