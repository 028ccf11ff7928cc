// mHC backward on sm_90a: backward_prepare (dB, grad_stats) and backward_finish (dX, dfn,
// dscale, dbase).
//
// backward_finish runs as three ordinary launches on the caller's stream:
//   1. MhcBwdTokenKernel: per token, dpre = X dU (a reduction over C), the Sinkhorn backward and
//      the chain down to dz, dsq, in FP64; one 64-float record per token in the workspace (dz
//      already split into BF16 hi + lo, the tensor-core operand of kernel 2).
//   2. MhcBwdColumnsTcKernel: CTAs own (token chunk, 64-channel column block of all streams);
//      the warps keep split fn and the dfn partial of their 16 columns in registers while the
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
static_assert(lay::kRecDz == 0 && lay::kRecDsq == kLogits,
              "dz as BF16 hi[24] + lo[24] fills floats [0, 24), 16-byte aligned, dsq follows");

// Sum over the 4-lane line of a 4x4 matrix held one entry per lane (lane & 15 = 4a + b): rows
// (over b) combine lanes xor 1, 2; columns (over a) xor 4, 8. Each lane gets the same bits.
__device__ __forceinline__ double LineSum(double v, bool rows) {
  const int o1 = rows ? 1 : 4, o2 = rows ? 2 : 8;
  v += __shfl_xor_sync(0xffffffffu, v, o1);
  v += __shfl_xor_sync(0xffffffffu, v, o2);
  return v;
}

__device__ __forceinline__ uint16_t Bf16Bits(float v) {
  return static_cast<uint16_t>(PackBf16(v, 0.0f) & 0xffffu);
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
  // The first loads are issued before the Sinkhorn backward below, which does not need them, so
  // the warp's requests stay in flight through its dependent FP64 chain; in the loop, the next
  // group is loaded before the current one is converted (two register buffers).
  constexpr int64_t kStep = 8 * 32 * Tr::kUnroll;
  auto load = [&](int64_t c0, uint4(&xr)[Tr::kUnroll][4], uint4(&ur)[Tr::kUnroll]) {
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
  };
  uint4 xr[Tr::kUnroll][4], ur[Tr::kUnroll];
  load(8 * lane, xr, ur);

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

  double dpre[4] = {0.0, 0.0, 0.0, 0.0};
  for (int64_t c0 = 8 * lane; c0 < C; c0 += kStep) {
    uint4 xn[Tr::kUnroll][4], un[Tr::kUnroll];
    load(c0 + kStep, xn, un);  // the next group is in flight while this one is converted
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
#pragma unroll
    for (int u = 0; u < Tr::kUnroll; ++u) {
      ur[u] = un[u];
#pragma unroll
      for (int a = 0; a < 4; ++a) xr[u][a] = xn[u][a];
    }
  }
#pragma unroll
  for (int a = 0; a < 4; ++a) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) dpre[a] += __shfl_xor_sync(0xffffffffu, dpre[a], off);
  }

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
  // Lane k < 24 writes dz_k split into BF16 hi + lo (halves k and 24 + k of floats [0, 24): the
  // operand kernel 2 copies as is) and dl_k (float 32 + k); lanes 24..31 write float k (24: dsq,
  // the rest zero); lanes 24..26 then write the dscale doubles.
  if (lane < kLogits) {
    const float v = static_cast<float>(dz);
    const uint16_t hi = Bf16Bits(v);
    uint16_t* rec_dz = reinterpret_cast<uint16_t*>(rec + lay::kRecDz);
    rec_dz[lane] = hi;
    rec_dz[kLogits + lane] = Bf16Bits(v - __uint_as_float(static_cast<uint32_t>(hi) << 16));
    rec[lay::kRecDl + lane] = static_cast<float>(dl);
  } else {
    rec[lane] = lane == lay::kRecDsq
                    ? static_cast<float>(-0.5 * dr * r * r * r / static_cast<double>(4 * C))
                    : 0.0f;
  }
  double* rec_d = reinterpret_cast<double*>(rec);
  if (lane == kLogits) rec_d[kRecDscaleD] = g0_0;
  if (lane == kLogits + 1) rec_d[kRecDscaleD + 1] = g0_4;
  if (lane == kLogits + 2) rec_d[kRecDscaleD + 2] = g2;
}

// ---------------------------------------------------------------------------------------------
// backward_finish, kernel 2: dX and the dfn partials, with both 24-wide products as BF16 MMAs
// (m16n8k16, FP32 accumulation). Operands are split hi + lo BF16 so the products keep ~16 bits:
//   dxmap [tok x col] = [dz_hi | dz_lo | dz_hi | 0] (k = 80) x [fn_hi; fn_hi; fn_lo; 0]
//   dfn   [48 x col]  = [dz_hi | dz_lo]^T (k = tokens) x X, rows j and 24 + j added at the end
// X is BF16 already, so it needs no split. The MMA's FP32 accumulation truncates, so dfn takes a
// fresh accumulator per stage (32 tokens) that is added to the running FP32 sum.
// Kernel 1 stores dz already split ([hi | lo], floats [0, 24) of the record), so the cp.async
// ring copies it straight into a per-stage tile dz_s[tok][hi | lo] that is both A operands:
// dxmap's through ldmatrix (k = 48..71 re-reads the hi columns), dfn's dz^T through
// ldmatrix.trans (the tile's columns are the rows of dz^T). A stage needs one block barrier.
// A CTA owns kCh channels of all four streams (4 kCh columns of fn) and a token chunk; each warp
// owns 16 columns (two n8 tiles) of one stream, so split fn (20 registers) and the dfn tiles fit
// in 128 registers and 16 warps run per SM. dxmap's n8 tiles interleave channel pairs so that a
// lane's accumulators are four adjacent channels: 8-byte shared reads and dX stores.
// At T = 16384, C = 4096 (ncu): FFMA version 1.07 ms; first MMA version (8 warps of 32 columns,
// 254 registers, dz split in shared memory between two barriers a stage, 8-way bank conflicts
// on the coefficient rows) 0.925 ms; this one 0.61 ms. Measured alternatives: 32-channel CTAs
// (two per SM) 0.63 ms, 8 warps of 32 columns or a 4-stage ring no faster.
template <int kChannels, int kStageCount>
struct BwdColumnsTcTraits {
  static constexpr int kCh = kChannels;  // channels per stream per CTA
  static constexpr int kStages = kStageCount;
  static constexpr int kWarpCols = 16;
  static constexpr int kNTiles = kWarpCols / 8;
  static constexpr int kWarpsPerStream = kCh / kWarpCols;
  static constexpr int kWarps = 4 * kWarpsPerStream;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocks = 512 / kThreads;  // 128 registers a thread
  static constexpr int kTok = 32;  // tokens per stage: 2 m16 tiles (dxmap), 2 k16 steps (dfn)
  static constexpr int kPieces = kCh / 8;    // 16-byte copies per token row of one stream
  static constexpr int kXRow = 4 * kCh + 8;  // BF16; +16 B: ldmatrix rows hit distinct banks
  // dY and dU rows are only read 8 bytes a lane (rows g x quads q): rows 8 words apart in banks.
  static constexpr int kYRow = 4 * kCh + 16;   // BF16
  static constexpr int kURow = kCh + 16;       // BF16
  static constexpr int kKDx = 80;              // dxmap's k: [hi | lo | hi | pad] logits
  static constexpr int kDzCols = 2 * kLogits;  // dz_s holds [hi | lo]
  static constexpr int kDzRow = kDzCols + 8;   // BF16; 112 B: 8 rows in distinct bank quads
  static constexpr int kDzChunks = kDzCols * 2 / 16;
  // coef_s per token: [0, 4) record floats [24, 28) (dsq first); [4, 32) stats [24, 52).
  // Rows of 36 floats: the 8 tokens a warp reads at once (rows g) fall in distinct banks.
  static constexpr int kCoefFloats = 32;
  static constexpr int kCoefRow = kCoefFloats + 4;
  static constexpr int kCoefDsq = 0;
  static constexpr int kCoefPre = 4 + 1;  // pre_a  = stats[25 + a]
  static constexpr int kCoefR = 4 + 9;    // R[a][b] = stats[33 + 4a + b]
  static constexpr int kCoefChunks = kCoefFloats * 4 / 16;
  static constexpr int kRowChunks = kDzChunks + kCoefChunks;
  // One stage: X, dY, dU, dz, coef tiles.
  static constexpr int kXStage = kTok * kXRow * 2;
  static constexpr int kOffDy = kXStage;
  static constexpr int kOffU = kXStage + kTok * kYRow * 2;
  static constexpr int kOffDz = kOffU + kTok * kURow * 2;
  static constexpr int kOffCoef = kOffDz + kTok * kDzRow * 2;
  static constexpr int kStageBytes = kOffCoef + kTok * kCoefRow * 4;
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static_assert(kCh % kWarpCols == 0 && kNTiles == 2, "two n8 tiles: one ldmatrix.x4, 8-byte rows");
  static_assert((kYRow / 2) % 32 == 8 && ((kURow / 2) % 32 == 8 || (kURow / 2) % 32 == 24),
                "8-byte reads of 4 rows x 4 quads hit distinct banks");
  static_assert(kMhcCAlign % kCh == 0, "column blocks tile every valid C");
  static_assert(kXRow * 2 % 128 == 16 && kURow * 2 % 16 == 0 && kDzRow * 2 % 128 == 112,
                "row strides");
  static_assert(kOffU % 16 == 0 && kOffDz % 16 == 0 && kOffCoef % 16 == 0 && kStageBytes % 16 == 0,
                "16-byte aligned regions");
  static_assert(kMinBlocks * kSmemBytes <= 227 * 1024, "kMinBlocks CTAs per SM");
  static_assert(lay::kRecDsq % 4 == 0 && lay::kRecDsq + 4 <= lay::kRecDl, "dsq's 16 bytes");
  static_assert(lay::kTokenRecordFloats == kMhcStatsWidth, "records and stats share a row stride");
  static_assert(kTok * 4 * kPieces % kThreads == 0, "X and dY copies divide evenly");
  static_assert(kTok * kPieces <= kThreads, "one dU copy a thread at most");
};

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks)
    MhcBwdColumnsTcKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ dY,
                          const uint16_t* __restrict__ dU, const float* __restrict__ fn,
                          const float* __restrict__ stats, const float* __restrict__ records,
                          uint16_t* __restrict__ dX, float* __restrict__ partials, int64_t T,
                          int64_t C, int64_t chunks) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto x_tile = [&](int slot) {
    return reinterpret_cast<uint16_t(*)[Tr::kXRow]>(smem + slot * Tr::kStageBytes);
  };
  auto dy_tile = [&](int slot) {
    return reinterpret_cast<uint16_t(*)[Tr::kYRow]>(smem + slot * Tr::kStageBytes + Tr::kOffDy);
  };
  auto du_tile = [&](int slot) {
    return reinterpret_cast<uint16_t(*)[Tr::kURow]>(smem + slot * Tr::kStageBytes + Tr::kOffU);
  };
  auto dz_tile = [&](int slot) {
    return reinterpret_cast<uint16_t(*)[Tr::kDzRow]>(smem + slot * Tr::kStageBytes + Tr::kOffDz);
  };
  auto coef_tile = [&](int slot) {
    return reinterpret_cast<float(*)[Tr::kCoefRow]>(smem + slot * Tr::kStageBytes + Tr::kOffCoef);
  };

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q = lane % 4;
  const int a = warp / Tr::kWarpsPerStream;                      // stream
  const int wch = Tr::kWarpCols * (warp % Tr::kWarpsPerStream);  // warp's first channel
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * Tr::kCh;
  const int64_t K = 4 * C;
  const int64_t chunk = blockIdx.y;
  const int64_t t_begin = T * chunk / chunks, t_end = T * (chunk + 1) / chunks;
  const int64_t n_stages = (t_end - t_begin + Tr::kTok - 1) / Tr::kTok;

  // Tokens past the chunk are zero-filled in every tile (dz and X both, so the products are 0).
  // A thread's copies are the same pieces of every stage: the offsets below depend on tid and
  // constants only (32-bit), and each stage adds its token base once.
  constexpr int kXCopies = Tr::kTok * 4 * Tr::kPieces / Tr::kThreads;
  constexpr int kRowCopies = (Tr::kTok * Tr::kRowChunks + Tr::kThreads - 1) / Tr::kThreads;
  auto issue = [&](int64_t st) {
    if (st < n_stages) {
      const int slot = static_cast<int>(st % Tr::kStages);
      const int64_t tb = t_begin + st * Tr::kTok;
      const int64_t valid = t_end - tb;  // tokens of this stage inside the chunk
      unsigned char* sb = smem + slot * Tr::kStageBytes;
      const uint16_t* xg = X + tb * 4 * C + c0;
      const uint16_t* yg = dY + tb * 4 * C + c0;
#pragma unroll
      for (int i = 0; i < kXCopies; ++i) {
        const int k = tid + i * Tr::kThreads;
        const int tok = k / (4 * Tr::kPieces), s = (k / Tr::kPieces) % 4, piece = k % Tr::kPieces;
        const bool ok = tok < valid;
        const int off = ok ? (4 * tok + s) * static_cast<int>(C) + 8 * piece : 0;
        CpAsync16Zfill(sb + 2 * (tok * Tr::kXRow + s * Tr::kCh + 8 * piece), xg + off, ok);
        CpAsync16Zfill(sb + Tr::kOffDy + 2 * (tok * Tr::kYRow + s * Tr::kCh + 8 * piece), yg + off,
                       ok);
      }
      if (tid < Tr::kTok * Tr::kPieces) {
        const int tok = tid / Tr::kPieces, piece = tid % Tr::kPieces;
        const bool ok = tok < valid;
        const int off = ok ? tok * static_cast<int>(C) + 8 * piece : 0;
        CpAsync16Zfill(sb + Tr::kOffU + 2 * (tok * Tr::kURow + 8 * piece), dU + tb * C + c0 + off,
                       ok);
      }
#pragma unroll
      for (int i = 0; i < kRowCopies; ++i) {
        const int k = tid + i * Tr::kThreads;
        if (k < Tr::kTok * Tr::kRowChunks) {
          const int tok = k / Tr::kRowChunks, piece = k % Tr::kRowChunks;
          const bool ok = tok < valid;
          // Records and stats rows are both 64 floats.
          const int64_t row = (tb + (ok ? tok : 0)) * kMhcStatsWidth;
          const float* src;
          int dst;
          if (piece < Tr::kDzChunks) {
            src = records + row + lay::kRecDz + 4 * piece;
            dst = Tr::kOffDz + 2 * tok * Tr::kDzRow + 16 * piece;
          } else {
            const int p2 = piece - Tr::kDzChunks;
            src = p2 == 0 ? records + row + lay::kRecDsq : stats + row + 20 + 4 * p2;
            dst = Tr::kOffCoef + 4 * tok * Tr::kCoefRow + 16 * p2;
          }
          CpAsync16Zfill(sb + dst, src, ok);
        }
      }
    }
    CpAsyncCommit();  // always, so every thread counts the same groups
  };

  // fn as the B operand of dxmap, split, for this warp's n8 tiles: rows k of
  // [fn_hi; fn_hi; fn_lo; 0], column n = lane / 4.
  uint32_t fb[Tr::kKDx / 16][Tr::kNTiles][2];
#pragma unroll
  for (int nt = 0; nt < Tr::kNTiles; ++nt) {
    const int64_t i = a * C + c0 + wch + 4 * (g / 2) + 2 * nt + g % 2;
    // Row k of the split stack (k depends on the lane, so it is computed, not indexed).
    auto bv = [&](int k) {
      if (k >= 3 * kLogits) return 0.0f;
      const float v = __ldg(fn + (k % kLogits) * K + i);
      const float hi = __bfloat162float(__float2bfloat16_rn(v));
      return k < 2 * kLogits ? hi : v - hi;
    };
#pragma unroll
    for (int ks = 0; ks < Tr::kKDx / 16; ++ks) {
      fb[ks][nt][0] = PackBf16(bv(16 * ks + 2 * q), bv(16 * ks + 2 * q + 1));
      fb[ks][nt][1] = PackBf16(bv(16 * ks + 2 * q + 8), bv(16 * ks + 2 * q + 9));
    }
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
    auto x_s = x_tile(slot);
    auto dy_s = dy_tile(slot);
    auto du_s = du_tile(slot);
    auto dz_s = dz_tile(slot);
    auto coef_s = coef_tile(slot);
    const int64_t tb = t_begin + st * Tr::kTok;
    const int nb = static_cast<int>(t_end - tb < Tr::kTok ? t_end - tb : Tr::kTok);

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
        uint32_t xb[2 * Tr::kNTiles];  // B fragments of the n8 tiles
#pragma unroll
        for (int np = 0; np < Tr::kNTiles / 2; ++np) {
          LdMatrixX4Trans(&x_s[16 * ks + (lane & 7) + 8 * ((lane >> 3) & 1)]
                              [a * Tr::kCh + wch + 16 * np + 8 * (lane >> 4)],
                          xb + 4 * np);
        }
#pragma unroll
        for (int mt = 0; mt < 3; ++mt) {
          // A = dz^T: matrix i holds logits 16 mt + 8 (i & 1) .. + 8 of tokens 8 (i >> 1) .. + 8.
          uint32_t af[4];
          LdMatrixX4Trans(
              &dz_s[16 * ks + (lane & 7) + 8 * (lane >> 4)][16 * mt + 8 * ((lane >> 3) & 1)], af);
#pragma unroll
          for (int nt = 0; nt < Tr::kNTiles; ++nt) {
            MmaBf16(fr[mt][nt], af[0], af[1], af[2], af[3], xb[2 * nt], xb[2 * nt + 1]);
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
        uint32_t af[4];
        // k = 16 ks.. of [hi | lo | hi | pad] is column 16 ks mod 48 of [hi | lo]; the pad (lo
        // 0..7 at k = 72..79) meets fn's zero rows.
        LdMatrixX4(&dz_s[16 * mt + (lane & 15)][(16 * ks) % Tr::kDzCols + 8 * (lane >> 4)], af);
#pragma unroll
        for (int nt = 0; nt < Tr::kNTiles; ++nt) {
          MmaBf16(d[nt], af[0], af[1], af[2], af[3], fb[ks][nt][0], fb[ks][nt][1]);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int tt = 16 * mt + g + 8 * h;
        if (tt < nb) {
          const float* cf = coef_s[tt];
          const float pre = cf[Tr::kCoefPre + a];
          const float dsq2 = 2.0f * cf[Tr::kCoefDsq];
          float rab[4];
#pragma unroll
          for (int b = 0; b < 4; ++b) rab[b] = cf[Tr::kCoefR + 4 * a + b];
          // This lane's four channels; tile nt holds ch + 2 nt and ch + 2 nt + 1 (word nt).
          const int ch = wch + 4 * q;
          const uint2 xv = *reinterpret_cast<const uint2*>(&x_s[tt][a * Tr::kCh + ch]);
          const uint2 uv = *reinterpret_cast<const uint2*>(&du_s[tt][ch]);
          // Per channel: pre dU, then the four R dY terms in order, then dxmap + 2 dsq x.
          float v[4] = {pre * Bf16Lo(uv.x), pre * Bf16Hi(uv.x), pre * Bf16Lo(uv.y),
                        pre * Bf16Hi(uv.y)};
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            const uint2 yv = *reinterpret_cast<const uint2*>(&dy_s[tt][b * Tr::kCh + ch]);
            v[0] = fmaf(rab[b], Bf16Lo(yv.x), v[0]);
            v[1] = fmaf(rab[b], Bf16Hi(yv.x), v[1]);
            v[2] = fmaf(rab[b], Bf16Lo(yv.y), v[2]);
            v[3] = fmaf(rab[b], Bf16Hi(yv.y), v[3]);
          }
          const float x4[4] = {Bf16Lo(xv.x), Bf16Hi(xv.x), Bf16Lo(xv.y), Bf16Hi(xv.y)};
          uint32_t out[Tr::kNTiles];
#pragma unroll
          for (int nt = 0; nt < Tr::kNTiles; ++nt) {
            const float m0 = fmaf(dsq2, x4[2 * nt], d[nt][2 * h]);
            const float m1 = fmaf(dsq2, x4[2 * nt + 1], d[nt][2 * h + 1]);
            out[nt] = PackBf16(v[2 * nt] + m0, v[2 * nt + 1] + m1);
          }
          __stcs(reinterpret_cast<uint2*>(dX + ((tb + tt) * 4 + a) * C + c0 + ch),
                 make_uint2(out[0], out[1]));
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
#pragma unroll 4
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
#pragma unroll 8
    for (int64_t t = tid; t < T; t += Tr::kThreads) s += col[t * lay::kTokenRecordFloats];
  } else {
    const double* col = reinterpret_cast<const double*>(records) + kRecDscaleD + (which - kLogits);
#pragma unroll 8
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

  using ColTr = mhc_cuda::BwdColumnsTcTraits<64, 3>;
  auto* col_kernel = mhc_cuda::MhcBwdColumnsTcKernel<ColTr>;
  // Above the 48 KiB default; set on every call since the attribute is per device.
  MHC_RETURN_IF_ERROR(mhc_cuda::CudaStatus(
      cudaFuncSetAttribute(col_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           ColTr::kSmemBytes),
      name));
  const dim3 col_grid(static_cast<unsigned>(p.C / ColTr::kCh), static_cast<unsigned>(chunks));
  col_kernel<<<col_grid, ColTr::kThreads, ColTr::kSmemBytes, stream>>>(
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
