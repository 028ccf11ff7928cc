// mHC backward on sm_90a: backward_prepare (dB, grad_stats) and backward_finish (dX, dfn,
// dscale, dbase).
//
// backward_finish runs as three ordinary launches on the caller's stream:
//   1. MhcBwdTokenKernel: per token, dpre = X dU (a reduction over C), the Sinkhorn backward and
//      the chain down to dz, dsq, in FP64; one 64-float record per token in the workspace.
//   2. MhcBwdColumnsTcKernel: CTAs own (token chunk, 64-channel column block of all streams);
//      the warps keep split fn and the dfn partial of their 32 columns in registers while the
//      chunk's tokens stream through a cp.async ring, run both 24-wide products on the tensor
//      cores, write dX, and at the end their dfn partial to the workspace.
//   3. MhcBwdReduceKernel: sums the chunk partials of dfn, and the token records of dscale and
//      dbase (those two in FP64), in a fixed order; adds them to the outputs under accumulate.
// Nothing depends on the workspace's prior contents, the grids are functions of (T, C,
// sinkhorn_iters) only, and there are no atomics, so the results are bitwise reproducible.
#include "cakegrad/kernels/mhc.h"
#include "mhc_common.cuh"
#include "reference/mhc_layout.h"

namespace cakegrad::kernels {
namespace mhc_cuda {
namespace {

namespace lay = ::cakegrad::kernels::mhc_layout;

// ---------------------------------------------------------------------------------------------
// backward_prepare: one CTA per token; each thread 8 channels at a time.
struct BwdPrepareTraits {
  static constexpr int kMaxThreads = 256;
  static constexpr int kSums = 20;  // dpost[4], dR[16]
  static_assert(kMhcMinC / 8 >= 32, "a CTA is at least one warp");
};

__global__ void __launch_bounds__(BwdPrepareTraits::kMaxThreads)
    MhcBwdPrepareKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ dY,
                        const uint16_t* __restrict__ B, const float* __restrict__ stats,
                        uint16_t* __restrict__ dB, float* __restrict__ grad_stats, int64_t C) {
  using Tr = BwdPrepareTraits;
  __shared__ float part[Tr::kMaxThreads / 32][Tr::kSums];
  const int64_t t = blockIdx.x;
  const int tid = threadIdx.x;
  float post[4];
#pragma unroll
  for (int b = 0; b < 4; ++b) post[b] = __ldg(stats + t * kMhcStatsWidth + 29 + b);
  float sums[Tr::kSums] = {};
  for (int64_t c = 8 * tid; c < C; c += 8 * blockDim.x) {
    float xf[4][8], dyf[4][8], bf[8];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      Unpack8(__ldcs(reinterpret_cast<const uint4*>(X + (t * 4 + a) * C + c)), xf[a]);
      Unpack8(__ldcs(reinterpret_cast<const uint4*>(dY + (t * 4 + a) * C + c)), dyf[a]);
    }
    Unpack8(__ldcs(reinterpret_cast<const uint4*>(B + t * C + c)), bf);
    float db[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float v = post[0] * dyf[0][e];
#pragma unroll
      for (int b = 1; b < 4; ++b) v = fmaf(post[b], dyf[b][e], v);
      db[e] = v;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        sums[b] = fmaf(dyf[b][e], bf[e], sums[b]);
#pragma unroll
        for (int a = 0; a < 4; ++a)
          sums[4 + 4 * a + b] = fmaf(dyf[b][e], xf[a][e], sums[4 + 4 * a + b]);
      }
    }
    __stcs(reinterpret_cast<uint4*>(dB + t * C + c), Pack8(db));
  }
  // Fixed-order reduction: butterfly within each warp, then warps in index order.
#pragma unroll
  for (int k = 0; k < Tr::kSums; ++k) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sums[k] += __shfl_xor_sync(0xffffffffu, sums[k], off);
  }
  if (tid % 32 == 0) {
#pragma unroll
    for (int k = 0; k < Tr::kSums; ++k) part[tid / 32][k] = sums[k];
  }
  __syncthreads();
  if (tid < kMhcGradStatsWidth) {
    float v = 0.0f;
    if (tid < Tr::kSums) {
      for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) v += part[w][tid];
    }
    grad_stats[t * kMhcGradStatsWidth + tid] = v;
  }
}

// ---------------------------------------------------------------------------------------------
// backward_finish, kernel 1: per-token scalars. One warp per token, in FP64 from dpre to the
// record: dscale[g] = sum_t sum_{j in g} dl_j m_j cancels (each Sinkhorn row of dl sums to
// zero, token terms have mixed signs), so its error is the per-term error times a condition
// number that training inputs pushed past 1e4; an FP32 chain (2 iters - 1 steps) gave 1.8e-5
// against the 1e-5 contract. The FP64 work is a few hundred DP instructions per token and one
// conversion per dpre product, which hide under the X/dU stream.
struct BwdTokenTraits {
  static constexpr int kMaxWarps = 4;
  static constexpr int kUnroll = 2;  // 8-channel groups in flight
  // The Sinkhorn chain (input of every step, one double per matrix entry) lives in dynamic
  // shared memory sized by sinkhorn_iters, kept within the 48 KiB that needs no opt-in.
  static constexpr int kSmemLimit = 48 * 1024;
  static constexpr int ChainBytesPerWarp(int iters) { return (2 * iters - 1) * 16 * 8; }
  static constexpr int Warps(int iters) {
    const int w = kSmemLimit / ChainBytesPerWarp(iters);
    return w < kMaxWarps ? w : kMaxWarps;
  }
};
static_assert(BwdTokenTraits::Warps(kMhcMaxSinkhornIters) >= 1, "one warp's chain fits");

// The record keeps dz, dsq and dl as floats (what kernels 2 and 3 consume) and the three dscale
// terms as doubles, so kernel 3 sums them over tokens without rounding each to FP32 first.
constexpr int kRecDscaleD = lay::kRecDscale / 2;  // index in the record viewed as doubles
static_assert(lay::kRecDscale % 2 == 0, "dscale doubles must be 8-byte aligned");
static_assert(lay::kRecDscale + 2 * 3 <= lay::kTokenRecordFloats, "3 doubles fit the record");
static_assert(lay::kRecDl + kLogits <= lay::kRecDscale, "dl floats precede the doubles");
static_assert(lay::kTokenRecordFloats % 2 == 0, "records stay 8-byte aligned");

// Sum over the 4-lane line of a 4x4 matrix held one entry per lane (lane & 15 = 4a + b): rows
// (over b) combine lanes xor 1, 2; columns (over a) xor 4, 8. Each lane gets the same bits.
__device__ __forceinline__ double LineSum(double v, bool rows) {
  const int o1 = rows ? 1 : 4, o2 = rows ? 2 : 8;
  v += __shfl_xor_sync(0xffffffffu, v, o1);
  v += __shfl_xor_sync(0xffffffffu, v, o2);
  return v;
}

__device__ __forceinline__ double SigmoidD(double v) { return 1.0 / (1.0 + exp(-v)); }

__global__ void __launch_bounds__(BwdTokenTraits::kMaxWarps * 32)
    MhcBwdTokenKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ dU,
                      const float* __restrict__ scale, const float* __restrict__ base,
                      const float* __restrict__ stats, const float* __restrict__ grad_stats,
                      float* __restrict__ records, int64_t T, int64_t C, float hc_eps_f,
                      int iters) {
  using Tr = BwdTokenTraits;
  extern __shared__ double chain_s[];  // [warps][2 iters - 1][16]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int steps = 2 * iters - 1;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + warp;
  if (t >= T) return;  // whole warps only: no block-wide barrier follows

  // dpre_a = sum_c dU[t, c] X[t, a, c]. A BF16 x BF16 product is exact in FP32; the sum is FP64.
  double dpre[4] = {0.0, 0.0, 0.0, 0.0};
  for (int64_t c0 = 8 * lane; c0 < C; c0 += 8 * 32 * Tr::kUnroll) {
    uint4 xr[Tr::kUnroll][4], ur[Tr::kUnroll];
#pragma unroll
    for (int u = 0; u < Tr::kUnroll; ++u) {
      const int64_t c = c0 + 8 * 32 * u;
      const bool ok = c < C;
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        xr[u][a] = ok ? __ldg(reinterpret_cast<const uint4*>(X + (t * 4 + a) * C + c))
                      : make_uint4(0, 0, 0, 0);
      }
      ur[u] = ok ? __ldg(reinterpret_cast<const uint4*>(dU + t * C + c)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < Tr::kUnroll; ++u) {
      float uf[8], xf[8];
      Unpack8(ur[u], uf);
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        Unpack8(xr[u][a], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) dpre[a] += static_cast<double>(uf[e] * xf[e]);
      }
    }
  }
#pragma unroll
  for (int a = 0; a < 4; ++a) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) dpre[a] += __shfl_xor_sync(0xffffffffu, dpre[a], off);
  }

  const float* st = stats + t * kMhcStatsWidth;
  const float* gs = grad_stats + t * kMhcGradStatsWidth;
  const double r = st[24];
  const double hc_eps = hc_eps_f;

  // Sinkhorn backward, one matrix entry per lane (lanes 16..31 mirror 0..15 and are discarded).
  const int idx = lane & 15;
  const double L = static_cast<double>(st[8 + idx]) * scale[2] + base[8 + idx];
  double soft, p;
  {
    const double mx =
        fmax(fmax(L, __shfl_xor_sync(0xffffffffu, L, 1)),
             fmax(__shfl_xor_sync(0xffffffffu, L, 2), __shfl_xor_sync(0xffffffffu, L, 3)));
    const double e = exp(L - mx);
    soft = e / LineSum(e, true);
    p = soft + hc_eps;
  }
  double* chain = chain_s + static_cast<int64_t>(warp) * steps * 16;
  for (int s = 0; s < steps; ++s) {
    if (lane < 16) chain[16 * s + idx] = p;  // input of step s
    p = p / (LineSum(p, (s & 1) != 0) + hc_eps);
  }
  __syncwarp();
  double gr = gs[4 + idx];  // dR
  double y = p;             // output of the current step
  for (int s = steps - 1; s >= 0; --s) {
    const bool rows = (s & 1) != 0;
    const double in = chain[16 * s + idx];
    const double dot = LineSum(gr * y, rows);
    gr = (gr - dot) / (LineSum(in, rows) + hc_eps);
    y = in;
  }
  const double dL = soft * (gr - LineSum(gr * soft, true));

  // dl for all 24 logits in lanes 0..23; lane 8 + k takes dL of entry k from lane k.
  const double dL_k = __shfl_sync(0xffffffffu, dL, (lane + 24) & 31);
  double dl = 0.0, m = 0.0;
  if (lane < kLogits) {
    m = st[lane];
    if (lane < 8) {
      const double l = m * scale[lane / 4] + base[lane];
      const double sg = SigmoidD(l);
      dl = lane < 4 ? dpre[lane] * sg * (1.0 - sg) : gs[lane - 4] * 2.0 * sg * (1.0 - sg);
    } else {
      dl = dL_k;
    }
  }
  const double sc = lane < kLogits ? scale[Group(lane)] : 0.0;
  const double dm = dl * sc;
  const double dz = dm * r;
  double dr = lane < kLogits ? dm * (m / r) : 0.0;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) dr += __shfl_xor_sync(0xffffffffu, dr, off);
  // dscale terms: groups are lanes [0,4), [4,8), [8,24); butterfly sums within each group.
  const double dsm = dl * m;
  double g0 = dsm + __shfl_xor_sync(0xffffffffu, dsm, 1);
  g0 += __shfl_xor_sync(0xffffffffu, g0, 2);  // lanes 0..3: group 0; 4..7: group 1
  double g2 = (lane >= 8 && lane < kLogits) ? dsm : 0.0;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) g2 += __shfl_xor_sync(0xffffffffu, g2, off);
  const double g0_0 = __shfl_sync(0xffffffffu, g0, 0);  // every lane shuffles
  const double g0_4 = __shfl_sync(0xffffffffu, g0, 4);

  float* rec = records + t * lay::kTokenRecordFloats;
  // Lane k writes float k ([0,24) dz, 24 dsq, the rest zero) and, for k < 24, float 32 + k
  // (dl); lanes 24..26 write the dscale doubles.
  float lo = 0.0f;
  if (lane < kLogits) lo = static_cast<float>(dz);
  if (lane == lay::kRecDsq) {
    lo = static_cast<float>(-0.5 * dr * r * r * r / static_cast<double>(4 * C));
  }
  rec[lane] = lo;
  if (lane < kLogits) rec[lay::kRecDl + lane] = static_cast<float>(dl);
  double* rec_d = reinterpret_cast<double*>(rec);
  if (lane == kLogits) rec_d[kRecDscaleD] = g0_0;
  if (lane == kLogits + 1) rec_d[kRecDscaleD + 1] = g0_4;
  if (lane == kLogits + 2) rec_d[kRecDscaleD + 2] = g2;
}

// ---------------------------------------------------------------------------------------------
// backward_finish, kernel 2: dX and the dfn partials, with both 24-wide products as BF16 MMAs
// (m16n8k16, FP32 accumulation). The FP32-FFMA version (fn and dfn partials in registers) was
// issue-bound: 1.07 ms at T = 16384, C = 4096, against 0.92 ms for this one. Operands are split
// hi + lo BF16 so the products keep ~16 bits:
//   dxmap [tok x col] = [dz_hi | dz_lo | dz_hi | 0] (k = 80) x [fn_hi; fn_hi; fn_lo; 0]
//   dfn   [48 x col]  = [dz_hi^T; dz_lo^T] (k = tokens) x X, rows j and 24 + j added at the end
// X is BF16 already, so it needs no split. The MMA's FP32 accumulation truncates, so dfn takes a
// fresh accumulator per stage (32 tokens) that is added to the running FP32 sum.
// A CTA owns 64 channels of all four streams (256 columns of fn) and a token chunk; warp w
// owns stream w / 2, channels 32 (w % 2) .. + 32 (four n8 tiles). The register-resident fn and
// dfn tiles take ~250 registers, so one CTA runs per SM; a 4-stage ring measured slower (1.19 ms)
// than these 3 stages (1.15 ms for the whole backward_finish).
struct BwdColumnsTcTraits {
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kCh = 64;  // channels per stream per CTA
  static constexpr int kWarpCols = 32;
  static constexpr int kNTiles = kWarpCols / 8;
  static constexpr int kTok = 32;  // tokens per stage: 2 m16 tiles (dxmap), 2 k16 steps (dfn)
  static constexpr int kStages = 3;
  static constexpr int kXRow = 4 * kCh + 8;  // BF16; +16 B: ldmatrix rows hit distinct banks
  static constexpr int kURow = kCh + 8;      // BF16
  static constexpr int kCoefFloats = 64;     // [0, 32) record (dz, dsq); [32, 60) stats[24, 52)
  static constexpr int kCoefPre = 32 + 1;    // pre_a  = stats[25 + a]
  static constexpr int kCoefR = 32 + 9;      // R[a][b] = stats[33 + 4a + b]
  static constexpr int kRecChunks = 32 * 4 / 16;   // 16-byte copies of a record's first half
  static constexpr int kStatChunks = 28 * 4 / 16;  // 16-byte copies of stats[24, 52)
  static constexpr int kKDx = 80;                  // [hi | lo | hi | pad] logits
  static constexpr int kDzARow = kKDx + 8;         // BF16; 44 words: 8 rows x 4 lanes in 32 banks
  static constexpr int kDzTRow = kTok + 8;         // BF16; 20 words: likewise
  static constexpr int kXStage = kTok * kXRow * 2;
  static constexpr int kUStage = kTok * kURow * 2;
  static constexpr int kCoefStage = kTok * kCoefFloats * 4;
  static constexpr int kOffDy = kStages * kXStage;
  static constexpr int kOffU = 2 * kStages * kXStage;
  static constexpr int kOffCoef = kOffU + kStages * kUStage;
  static constexpr int kOffDzA = kOffCoef + kStages * kCoefStage;
  static constexpr int kOffDzT = kOffDzA + kTok * kDzARow * 2;
  static constexpr int kSmemBytes = kOffDzT + 2 * kLogits * kDzTRow * 2;
  static_assert(4 * kCh / kWarpCols == kWarps, "warps tile the CTA's columns");
  static_assert(kMhcCAlign % kCh == 0, "column blocks tile every valid C");
  static_assert(kXRow * 2 % 128 == 16 && kURow * 2 % 16 == 0, "row strides");
  static_assert(kOffDy % 16 == 0 && kOffU % 16 == 0 && kOffCoef % 16 == 0 && kOffDzA % 16 == 0 &&
                    kOffDzT % 16 == 0,
                "16-byte aligned regions");
  static_assert(kSmemBytes <= 227 * 1024, "one CTA per SM");
  static_assert(lay::kRecDsq < 32, "the record's first half holds dz and dsq");
};

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void CpAsync16Zfill(void* smem, const void* gmem, bool valid) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;  // 0: no bytes read, 16 zero bytes written
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n)
               : "memory");
}

// B fragments of two n8 tiles from a row-major [k][n] BF16 tile: lane l addresses row
// (l & 7) + 8 ((l >> 3) & 1) of column block (l >> 4).
__device__ __forceinline__ void LdMatrixX4Trans(const void* smem, uint32_t* r) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

__device__ __forceinline__ uint16_t Bf16Bits(float v) {
  return static_cast<uint16_t>(PackBf16(v, 0.0f) & 0xffffu);
}

__global__ void __launch_bounds__(BwdColumnsTcTraits::kThreads, 1)
    MhcBwdColumnsTcKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ dY,
                          const uint16_t* __restrict__ dU, const float* __restrict__ fn,
                          const float* __restrict__ stats, const float* __restrict__ records,
                          uint16_t* __restrict__ dX, float* __restrict__ partials, int64_t T,
                          int64_t C, int64_t chunks) {
  using Tr = BwdColumnsTcTraits;
  extern __shared__ __align__(16) unsigned char smem[];
  auto x_s = reinterpret_cast<uint16_t(*)[Tr::kTok][Tr::kXRow]>(smem);
  auto dy_s = reinterpret_cast<uint16_t(*)[Tr::kTok][Tr::kXRow]>(smem + Tr::kOffDy);
  auto du_s = reinterpret_cast<uint16_t(*)[Tr::kTok][Tr::kURow]>(smem + Tr::kOffU);
  auto coef_s = reinterpret_cast<float(*)[Tr::kTok][Tr::kCoefFloats]>(smem + Tr::kOffCoef);
  auto dzA = reinterpret_cast<uint16_t(*)[Tr::kDzARow]>(smem + Tr::kOffDzA);
  auto dzT = reinterpret_cast<uint16_t(*)[Tr::kDzTRow]>(smem + Tr::kOffDzT);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q = lane % 4;
  const int a = warp / 2;                      // stream
  const int wch = Tr::kWarpCols * (warp % 2);  // warp's first channel in the block
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * Tr::kCh;
  const int64_t K = 4 * C;
  const int64_t chunk = blockIdx.y;
  const int64_t t_begin = T * chunk / chunks, t_end = T * (chunk + 1) / chunks;
  const int64_t n_stages = (t_end - t_begin + Tr::kTok - 1) / Tr::kTok;

  auto issue = [&](int64_t st) {
    if (st < n_stages) {
      const int slot = static_cast<int>(st % Tr::kStages);
      const int64_t tb = t_begin + st * Tr::kTok;
#pragma unroll
      for (int k = tid; k < Tr::kTok * 32; k += Tr::kThreads) {  // X, dY: 32 pieces a token
        const int tok = k / 32, s = (k % 32) / 8, piece = k % 8;
        const bool ok = tb + tok < t_end;
        const int64_t off = ok ? ((tb + tok) * 4 + s) * C + c0 + 8 * piece : 0;
        CpAsync16Zfill(&x_s[slot][tok][s * Tr::kCh + 8 * piece], X + off, ok);
        CpAsync16Zfill(&dy_s[slot][tok][s * Tr::kCh + 8 * piece], dY + off, ok);
      }
      {
        const int tok = tid / 8, piece = tid % 8;
        const bool ok = tb + tok < t_end;
        const int64_t off = ok ? (tb + tok) * C + c0 + 8 * piece : 0;
        CpAsync16Zfill(&du_s[slot][tok][8 * piece], dU + off, ok);
      }
      for (int k = tid; k < Tr::kTok * (Tr::kRecChunks + Tr::kStatChunks); k += Tr::kThreads) {
        const int tok = k / (Tr::kRecChunks + Tr::kStatChunks);
        const int piece = k % (Tr::kRecChunks + Tr::kStatChunks);
        const int64_t t = tb + tok;
        if (t < t_end) {
          if (piece < Tr::kRecChunks) {
            CpAsync16(&coef_s[slot][tok][4 * piece],
                      records + t * lay::kTokenRecordFloats + 4 * piece);
          } else {
            const int p2 = piece - Tr::kRecChunks;
            CpAsync16(&coef_s[slot][tok][32 + 4 * p2], stats + t * kMhcStatsWidth + 24 + 4 * p2);
          }
        }
      }
    }
    CpAsyncCommit();  // always, so every thread counts the same groups
  };

  // fn as the B operand of dxmap, split, for this warp's four n8 tiles: rows k of
  // [fn_hi; fn_hi; fn_lo; 0], column n = lane / 4.
  uint32_t fb[Tr::kKDx / 16][Tr::kNTiles][2];
#pragma unroll
  for (int nt = 0; nt < Tr::kNTiles; ++nt) {
    const int64_t i = a * C + c0 + wch + 8 * nt + g;
    // Row k of the split stack (k depends on the lane, so it is computed, not indexed).
    auto bv = [&](int k) {
      if (k >= 72) return 0.0f;
      const float v = __ldg(fn + (k % kLogits) * K + i);
      const float hi = __bfloat162float(__float2bfloat16_rn(v));
      return k < 48 ? hi : v - hi;
    };
#pragma unroll
    for (int ks = 0; ks < Tr::kKDx / 16; ++ks) {
      fb[ks][nt][0] = PackBf16(bv(16 * ks + 2 * q), bv(16 * ks + 2 * q + 1));
      fb[ks][nt][1] = PackBf16(bv(16 * ks + 2 * q + 8), bv(16 * ks + 2 * q + 9));
    }
  }
  // dzA's pad columns stay zero.
  for (int k = tid; k < Tr::kTok * (Tr::kDzARow - 72); k += Tr::kThreads) {
    dzA[k / (Tr::kDzARow - 72)][72 + k % (Tr::kDzARow - 72)] = 0;
  }

  float acc[3][Tr::kNTiles][4];
#pragma unroll
  for (int mt = 0; mt < 3; ++mt) {
#pragma unroll
    for (int nt = 0; nt < Tr::kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
    }
  }

#pragma unroll
  for (int st = 0; st < Tr::kStages - 1; ++st) issue(st);
  for (int64_t st = 0; st < n_stages; ++st) {
    CpAsyncWait<Tr::kStages - 2>();
    __syncthreads();  // stage st landed everywhere; the previous stage's readers are done
    issue(st + Tr::kStages - 1);
    const int slot = static_cast<int>(st % Tr::kStages);
    const int64_t tb = t_begin + st * Tr::kTok;
    const int nb = static_cast<int>(t_end - tb < Tr::kTok ? t_end - tb : Tr::kTok);
    // Split dz into the two A layouts; tokens past the chunk get zeros (their X rows are zero).
    for (int k = tid; k < Tr::kTok * kLogits; k += Tr::kThreads) {
      const int tok = k / kLogits, j = k % kLogits;
      const float v = tok < nb ? coef_s[slot][tok][lay::kRecDz + j] : 0.0f;
      const uint16_t hi = Bf16Bits(v);
      const uint16_t lo = Bf16Bits(v - __uint_as_float(static_cast<uint32_t>(hi) << 16));
      dzA[tok][j] = hi;
      dzA[tok][24 + j] = lo;
      dzA[tok][48 + j] = hi;
      dzT[j][tok] = hi;
      dzT[24 + j][tok] = lo;
    }
    __syncthreads();

    // dfn: fresh accumulators for this stage's 32 tokens.
    {
      float fr[3][Tr::kNTiles][4];
#pragma unroll
      for (int mt = 0; mt < 3; ++mt) {
#pragma unroll
        for (int nt = 0; nt < Tr::kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) fr[mt][nt][e] = 0.0f;
        }
      }
#pragma unroll
      for (int ks = 0; ks < Tr::kTok / 16; ++ks) {
        uint32_t xb[Tr::kNTiles][2];
#pragma unroll
        for (int np = 0; np < Tr::kNTiles / 2; ++np) {
          const int row = 16 * ks + (lane & 7) + 8 * ((lane >> 3) & 1);
          const int col = a * Tr::kCh + wch + 16 * np + 8 * (lane >> 4);
          uint32_t r[4];
          LdMatrixX4Trans(&x_s[slot][row][col], r);
          xb[2 * np][0] = r[0];
          xb[2 * np][1] = r[1];
          xb[2 * np + 1][0] = r[2];
          xb[2 * np + 1][1] = r[3];
        }
#pragma unroll
        for (int mt = 0; mt < 3; ++mt) {
          const int k0 = 16 * ks + 2 * q;
          const uint32_t a0 = *reinterpret_cast<const uint32_t*>(&dzT[16 * mt + g][k0]);
          const uint32_t a1 = *reinterpret_cast<const uint32_t*>(&dzT[16 * mt + g + 8][k0]);
          const uint32_t a2 = *reinterpret_cast<const uint32_t*>(&dzT[16 * mt + g][k0 + 8]);
          const uint32_t a3 = *reinterpret_cast<const uint32_t*>(&dzT[16 * mt + g + 8][k0 + 8]);
#pragma unroll
          for (int nt = 0; nt < Tr::kNTiles; ++nt) {
            MmaBf16(fr[mt][nt], a0, a1, a2, a3, xb[nt][0], xb[nt][1]);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < 3; ++mt) {
#pragma unroll
        for (int nt = 0; nt < Tr::kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mt][nt][e] += fr[mt][nt][e];
        }
      }
    }

    // dX: dxmap on the tensor cores, then the pre, R and dsq terms per element.
#pragma unroll
    for (int mt = 0; mt < Tr::kTok / 16; ++mt) {
      float d[Tr::kNTiles][4];
#pragma unroll
      for (int nt = 0; nt < Tr::kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) d[nt][e] = 0.0f;
      }
#pragma unroll
      for (int ks = 0; ks < Tr::kKDx / 16; ++ks) {
        const int k0 = 16 * ks + 2 * q;
        const uint32_t a0 = *reinterpret_cast<const uint32_t*>(&dzA[16 * mt + g][k0]);
        const uint32_t a1 = *reinterpret_cast<const uint32_t*>(&dzA[16 * mt + g + 8][k0]);
        const uint32_t a2 = *reinterpret_cast<const uint32_t*>(&dzA[16 * mt + g][k0 + 8]);
        const uint32_t a3 = *reinterpret_cast<const uint32_t*>(&dzA[16 * mt + g + 8][k0 + 8]);
#pragma unroll
        for (int nt = 0; nt < Tr::kNTiles; ++nt) {
          MmaBf16(d[nt], a0, a1, a2, a3, fb[ks][nt][0], fb[ks][nt][1]);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int tt = 16 * mt + g + 8 * h;
        if (tt < nb) {
          const float* cf = coef_s[slot][tt];
          const float pre = cf[Tr::kCoefPre + a];
          const float dsq2 = 2.0f * cf[lay::kRecDsq];
          float rab[4];
#pragma unroll
          for (int b = 0; b < 4; ++b) rab[b] = cf[Tr::kCoefR + 4 * a + b];
#pragma unroll
          for (int nt = 0; nt < Tr::kNTiles; ++nt) {
            const int ch = wch + 8 * nt + 2 * q;
            const uint32_t xv =
                *reinterpret_cast<const uint32_t*>(&x_s[slot][tt][a * Tr::kCh + ch]);
            const uint32_t uv = *reinterpret_cast<const uint32_t*>(&du_s[slot][tt][ch]);
            float d0 = pre * Bf16Lo(uv), d1 = pre * Bf16Hi(uv);
#pragma unroll
            for (int b = 0; b < 4; ++b) {
              const uint32_t yv =
                  *reinterpret_cast<const uint32_t*>(&dy_s[slot][tt][b * Tr::kCh + ch]);
              d0 = fmaf(rab[b], Bf16Lo(yv), d0);
              d1 = fmaf(rab[b], Bf16Hi(yv), d1);
            }
            const float m0 = fmaf(dsq2, Bf16Lo(xv), d[nt][2 * h]);
            const float m1 = fmaf(dsq2, Bf16Hi(xv), d[nt][2 * h + 1]);
            __stcs(reinterpret_cast<uint32_t*>(dX + ((tb + tt) * 4 + a) * C + c0 + ch),
                   PackBf16(d0 + m0, d1 + m1));
          }
        }
      }
    }
  }
  CpAsyncWait<0>();  // no copy may still target shared memory when the CTA exits
  // Rows j (hi) and 24 + j (lo) of the dfn product: this lane holds j = g, g + 8, g + 16.
  float* part = partials + chunk * kLogits * K;
#pragma unroll
  for (int nt = 0; nt < Tr::kNTiles; ++nt) {
    const int64_t i = a * C + c0 + wch + 8 * nt + 2 * q;
    *reinterpret_cast<float2*>(part + g * K + i) =
        make_float2(acc[0][nt][0] + acc[1][nt][2], acc[0][nt][1] + acc[1][nt][3]);
    *reinterpret_cast<float2*>(part + (g + 8) * K + i) =
        make_float2(acc[0][nt][2] + acc[2][nt][0], acc[0][nt][3] + acc[2][nt][1]);
    *reinterpret_cast<float2*>(part + (g + 16) * K + i) =
        make_float2(acc[1][nt][0] + acc[2][nt][2], acc[1][nt][1] + acc[2][nt][3]);
  }
}

// ---------------------------------------------------------------------------------------------
// backward_finish, kernel 3: fixed-order sums. Blocks [0, dfn_blocks) sum the chunk partials of
// dfn (one float4 a thread); the next 27 blocks each reduce one of dbase[24], dscale[3] over
// the token records.
struct BwdReduceTraits {
  static constexpr int kThreads = 256;
  static constexpr int kScalarBlocks = kLogits + 3;
};

__global__ void __launch_bounds__(BwdReduceTraits::kThreads)
    MhcBwdReduceKernel(const float* __restrict__ partials, const float* __restrict__ records,
                       float* __restrict__ dfn, float* __restrict__ dscale,
                       float* __restrict__ dbase, int64_t T, int64_t C, int64_t chunks,
                       int64_t dfn_blocks, bool accumulate) {
  using Tr = BwdReduceTraits;
  const int tid = threadIdx.x;
  if (blockIdx.x < dfn_blocks) {
    const int64_t n4 = kLogits * 4 * C / 4;
    const int64_t k = blockIdx.x * static_cast<int64_t>(Tr::kThreads) + tid;
    if (k >= n4) return;
    const float4* p = reinterpret_cast<const float4*>(partials);
    float4 s = p[k];
    for (int64_t ch = 1; ch < chunks; ++ch) {
      const float4 v = p[ch * n4 + k];
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
    float4* out = reinterpret_cast<float4*>(dfn) + k;
    if (accumulate) {
      const float4 o = *out;
      s.x += o.x;
      s.y += o.y;
      s.z += o.z;
      s.w += o.w;
    }
    *out = s;
    return;
  }
  // dbase and dscale: FP64 over tokens (dscale cancels; see kernel 1), rounded once to FP32.
  __shared__ double red[Tr::kThreads];
  const int which = static_cast<int>(blockIdx.x - dfn_blocks);  // 0..23 dbase, 24..26 dscale
  double s = 0.0;
  if (which < kLogits) {
    const float* col = records + lay::kRecDl + which;
    for (int64_t t = tid; t < T; t += Tr::kThreads) s += col[t * lay::kTokenRecordFloats];
  } else {
    const double* col = reinterpret_cast<const double*>(records) + kRecDscaleD + (which - kLogits);
    for (int64_t t = tid; t < T; t += Tr::kThreads) s += col[t * (lay::kTokenRecordFloats / 2)];
  }
  red[tid] = s;
  __syncthreads();
#pragma unroll
  for (int w = Tr::kThreads / 2; w > 0; w /= 2) {
    if (tid < w) red[tid] += red[tid + w];
    __syncthreads();
  }
  if (tid == 0) {
    float* out = which < kLogits ? dbase + which : dscale + (which - kLogits);
    // Under accumulate the FP32 sum is added in FP32, like dfn's.
    const float v = static_cast<float>(red[0]);
    *out = accumulate ? *out + v : v;
  }
}

}  // namespace
}  // namespace mhc_cuda

Status MhcBackwardPrepareCuda(const MhcBwdPrepareParams& p, cudaStream_t stream) {
  const char* name = "mhc_backward_prepare";
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckShapeAndIters(name, p.T, p.C, 1));
  if (p.T == 0) return OkStatus();
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.X, "X"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dY, "dY"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.B, "B"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.stats, "stats"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dB, "dB"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.grad_stats, "grad_stats"));
  if (p.T > 0x7fffffff) return InvalidArgument(std::string(name) + ": T too large");
  const int threads = static_cast<int>(p.C / 8 < mhc_cuda::BwdPrepareTraits::kMaxThreads
                                           ? p.C / 8
                                           : mhc_cuda::BwdPrepareTraits::kMaxThreads);
  mhc_cuda::MhcBwdPrepareKernel<<<static_cast<unsigned>(p.T), threads, 0, stream>>>(
      p.X, p.dY, p.B, p.stats, p.dB, p.grad_stats, p.C);
  return mhc_cuda::LaunchStatus(name);
}

Status MhcBackwardFinishCuda(const MhcBwdFinishParams& p, cudaStream_t stream) {
  namespace lay = ::cakegrad::kernels::mhc_layout;
  const char* name = "mhc_backward_finish";
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckShapeAndIters(name, p.T, p.C, p.sinkhorn_iters));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dfn, "dfn"));
  if (p.dscale == nullptr || p.dbase == nullptr) {
    return InvalidArgument(std::string(name) + ": dscale and dbase are required");
  }
  const int64_t K = 4 * p.C;
  if (p.T == 0) {
    if (p.accumulate) return OkStatus();
    MHC_RETURN_IF_ERROR(mhc_cuda::CudaStatus(
        cudaMemsetAsync(p.dfn, 0, sizeof(float) * kMhcLogits * K, stream), name));
    MHC_RETURN_IF_ERROR(
        mhc_cuda::CudaStatus(cudaMemsetAsync(p.dscale, 0, sizeof(float) * 3, stream), name));
    return mhc_cuda::CudaStatus(cudaMemsetAsync(p.dbase, 0, sizeof(float) * kMhcLogits, stream),
                                name);
  }
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.X, "X"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dY, "dY"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dU, "dU"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.fn, "fn"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.stats, "stats"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.grad_stats, "grad_stats"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.dX, "dX"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.workspace, "workspace"));
  if (p.scale == nullptr || p.base == nullptr) {
    return InvalidArgument(std::string(name) + ": scale and base are required");
  }
  const int64_t need = MhcBackwardFinishWorkspaceBytes(p.T, p.C);
  if (p.workspace_bytes < need) {
    return InvalidArgument(std::string(name) + ": workspace has " +
                           std::to_string(p.workspace_bytes) + " bytes, needs " +
                           std::to_string(need));
  }
  float* records = static_cast<float*>(p.workspace);
  float* partials =
      reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay::BwdFinishRecordsBytes(p.T));
  const int64_t chunks = lay::BwdFinishChunks(p.T, p.C);

  using TokTr = mhc_cuda::BwdTokenTraits;
  const int tok_warps = TokTr::Warps(p.sinkhorn_iters);  // a function of the options only
  const int64_t tok_blocks = (p.T + tok_warps - 1) / tok_warps;
  mhc_cuda::MhcBwdTokenKernel<<<static_cast<unsigned>(tok_blocks), 32 * tok_warps,
                                tok_warps * TokTr::ChainBytesPerWarp(p.sinkhorn_iters), stream>>>(
      p.X, p.dU, p.scale, p.base, p.stats, p.grad_stats, records, p.T, p.C, p.hc_eps,
      p.sinkhorn_iters);
  MHC_RETURN_IF_ERROR(mhc_cuda::LaunchStatus(name));

  using ColTr = mhc_cuda::BwdColumnsTcTraits;
  // Above the 48 KiB default; set on every call since the attribute is per device.
  MHC_RETURN_IF_ERROR(mhc_cuda::CudaStatus(
      cudaFuncSetAttribute(mhc_cuda::MhcBwdColumnsTcKernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, ColTr::kSmemBytes),
      name));
  const dim3 col_grid(static_cast<unsigned>(p.C / ColTr::kCh), static_cast<unsigned>(chunks));
  mhc_cuda::MhcBwdColumnsTcKernel<<<col_grid, ColTr::kThreads, ColTr::kSmemBytes, stream>>>(
      p.X, p.dY, p.dU, p.fn, p.stats, records, p.dX, partials, p.T, p.C, chunks);
  MHC_RETURN_IF_ERROR(mhc_cuda::LaunchStatus(name));

  using RedTr = mhc_cuda::BwdReduceTraits;
  const int64_t dfn_blocks = (kMhcLogits * K / 4 + RedTr::kThreads - 1) / RedTr::kThreads;
  mhc_cuda::MhcBwdReduceKernel<<<static_cast<unsigned>(dfn_blocks + RedTr::kScalarBlocks),
                                 RedTr::kThreads, 0, stream>>>(
      partials, records, p.dfn, p.dscale, p.dbase, p.T, p.C, chunks, dfn_blocks, p.accumulate);
  return mhc_cuda::LaunchStatus(name);
}

}  // namespace cakegrad::kernels
