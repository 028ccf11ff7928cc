// mHC backward on sm_90a: backward_prepare (dB, grad_stats) and backward_finish (dX, dfn,
// dscale, dbase).
//
// backward_finish runs as three ordinary launches on the caller's stream:
//   1. MhcBwdTokenKernel: per token, dpre = X dU (a reduction over C), the Sinkhorn backward and
//      the chain down to dz, dsq, in FP64; one 64-float record per token in the workspace.
//   2. MhcBwdColumnsKernel: CTAs own (token chunk, 128-channel column block); each thread keeps
//      fn and its dfn partial for two columns of one stream in registers while it walks the
//      chunk's tokens, writes dX, and at the end its dfn partial to the workspace.
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
// backward_finish, kernel 2: dX and the dfn partials. A thread keeps fn and its dfn partial for
// two channels of one stream in registers (96 floats) while the CTA walks its token chunk. The
// token data (X, dY, dU tiles and the per-token coefficients) arrive through a cp.async ring of
// kStages shared-memory stages, so loads run kStages - 1 stages ahead of the FMAs (the first
// version read them straight from global memory and was latency-bound, 9x over the floor).
struct BwdColumnsTraits {
  static constexpr int kThreads = 256;
  static constexpr int kColsPerThread = 2;  // channels c, c + 1 of one stream a
  static constexpr int kColBlock = static_cast<int>(lay::kColsPerBlock);
  static constexpr int kThreadsPerStream = kColBlock / kColsPerThread;
  static constexpr int kTokPerStage = 4;
  static constexpr int kStages = 4;
  static constexpr int kCoefFloats = 64;   // [0, 32) record (dz, dsq); [32, 60) stats[24, 52)
  static constexpr int kCoefPre = 32 + 1;  // pre_a  = stats[25 + a]
  static constexpr int kCoefR = 32 + 9;    // R[a][b] = stats[33 + 4a + b]
  static constexpr int kRecChunks = 32 * 4 / 16;   // 16-byte copies of a record's first half
  static constexpr int kStatChunks = 28 * 4 / 16;  // 16-byte copies of stats[24, 52)
  // Per stage: X and dY tiles [tok][4][kColBlock], dU [tok][kColBlock] (BF16), coefficients.
  static constexpr int kXChunks = kTokPerStage * 4 * kColBlock * 2 / 16;
  static constexpr int kUChunks = kTokPerStage * kColBlock * 2 / 16;
  static constexpr int kCoefChunks = kTokPerStage * (kRecChunks + kStatChunks);
  static constexpr int kSmemBytes =
      kStages * (2 * kXChunks + kUChunks) * 16 + kStages * kTokPerStage * kCoefFloats * 4;
  static_assert(4 * kThreadsPerStream == kThreads, "one thread per (stream, channel pair)");
  static_assert(kMhcCAlign % kColBlock == 0, "column blocks tile every valid C");
  static_assert(kThreadsPerStream % 32 == 0, "a warp stays within one stream");
  static_assert(kXChunks == kThreads, "one 16-byte copy of X and of dY per thread and stage");
  static_assert(kUChunks + kCoefChunks <= kThreads, "dU and coefficient copies fit one pass");
  static_assert(lay::kRecDsq < 32, "the record's first half holds dz and dsq");
  static_assert(kSmemBytes <= 48 * 1024, "static shared memory limit");
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

__global__ void __launch_bounds__(BwdColumnsTraits::kThreads, 2)
    MhcBwdColumnsKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ dY,
                        const uint16_t* __restrict__ dU, const float* __restrict__ fn,
                        const float* __restrict__ stats, const float* __restrict__ records,
                        uint16_t* __restrict__ dX, float* __restrict__ partials, int64_t T,
                        int64_t C, int64_t chunks) {
  using Tr = BwdColumnsTraits;
  constexpr int kCB = Tr::kColBlock;
  __shared__ __align__(16) uint16_t x_s[Tr::kStages][Tr::kTokPerStage][4][kCB];
  __shared__ __align__(16) uint16_t dy_s[Tr::kStages][Tr::kTokPerStage][4][kCB];
  __shared__ __align__(16) uint16_t du_s[Tr::kStages][Tr::kTokPerStage][kCB];
  __shared__ __align__(16) float coef_s[Tr::kStages][Tr::kTokPerStage][Tr::kCoefFloats];

  const int tid = threadIdx.x;
  const int a = tid / Tr::kThreadsPerStream;
  const int cl = Tr::kColsPerThread * (tid % Tr::kThreadsPerStream);  // column in the block
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kCB;
  const int64_t c = c0 + cl;
  const int64_t K = 4 * C;
  const int64_t i = a * C + c;  // first of this thread's two columns of fn
  const int64_t chunk = blockIdx.y;
  const int64_t t_begin = T * chunk / chunks, t_end = T * (chunk + 1) / chunks;
  const int64_t n_stages = (t_end - t_begin + Tr::kTokPerStage - 1) / Tr::kTokPerStage;

  // Enqueues the copies of stage `st` (tokens t_begin + kTokPerStage * st ...) into ring slot
  // st % kStages; tokens past the chunk are skipped (and never read).
  auto issue = [&](int64_t st) {
    if (st < n_stages) {
      const int slot = static_cast<int>(st % Tr::kStages);
      const int64_t tb = t_begin + st * Tr::kTokPerStage;
      {  // X and dY: thread -> (token, stream, 16-byte piece)
        const int tok = tid / (4 * kCB / 8), rem = tid % (4 * kCB / 8);
        const int s = rem / (kCB / 8), piece = rem % (kCB / 8);
        if (tb + tok < t_end) {
          const int64_t off = ((tb + tok) * 4 + s) * C + c0 + 8 * piece;
          CpAsync16(&x_s[slot][tok][s][8 * piece], X + off);
          CpAsync16(&dy_s[slot][tok][s][8 * piece], dY + off);
        }
      }
      if (tid < Tr::kUChunks) {
        const int tok = tid / (kCB / 8), piece = tid % (kCB / 8);
        if (tb + tok < t_end)
          CpAsync16(&du_s[slot][tok][8 * piece], dU + (tb + tok) * C + c0 + 8 * piece);
      } else if (tid < Tr::kUChunks + Tr::kCoefChunks) {
        const int k = tid - Tr::kUChunks;
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

  float2 f[kLogits], acc[kLogits];
#pragma unroll
  for (int j = 0; j < kLogits; ++j) {
    f[j] = __ldg(reinterpret_cast<const float2*>(fn + j * K + i));
    acc[j] = make_float2(0.f, 0.f);
  }

#pragma unroll
  for (int st = 0; st < Tr::kStages - 1; ++st) issue(st);
  for (int64_t st = 0; st < n_stages; ++st) {
    CpAsyncWait<Tr::kStages - 2>();  // this thread's copies of stage st have landed
    __syncthreads();                 // everyone's have; slot (st - 1) % kStages is free
    issue(st + Tr::kStages - 1);
    const int slot = static_cast<int>(st % Tr::kStages);
    const int64_t tb = t_begin + st * Tr::kTokPerStage;
    const int nb = static_cast<int>(t_end - tb < Tr::kTokPerStage ? t_end - tb : Tr::kTokPerStage);
    for (int tt = 0; tt < nb; ++tt) {
      const float* cf = coef_s[slot][tt];
      const uint32_t xv = *reinterpret_cast<const uint32_t*>(&x_s[slot][tt][a][cl]);
      const uint32_t uv = *reinterpret_cast<const uint32_t*>(&du_s[slot][tt][cl]);
      const float x0 = Bf16Lo(xv), x1 = Bf16Hi(xv);
      const float pre = cf[Tr::kCoefPre + a];
      float d0 = pre * Bf16Lo(uv), d1 = pre * Bf16Hi(uv);
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const uint32_t yv = *reinterpret_cast<const uint32_t*>(&dy_s[slot][tt][b][cl]);
        const float rab = cf[Tr::kCoefR + 4 * a + b];
        d0 = fmaf(rab, Bf16Lo(yv), d0);
        d1 = fmaf(rab, Bf16Hi(yv), d1);
      }
      float m0 = 0.0f, m1 = 0.0f;
#pragma unroll
      for (int j = 0; j < kLogits; ++j) {
        const float dz = cf[lay::kRecDz + j];
        m0 = fmaf(dz, f[j].x, m0);
        m1 = fmaf(dz, f[j].y, m1);
        acc[j].x = fmaf(dz, x0, acc[j].x);
        acc[j].y = fmaf(dz, x1, acc[j].y);
      }
      const float dsq2 = 2.0f * cf[lay::kRecDsq];
      m0 = fmaf(dsq2, x0, m0);
      m1 = fmaf(dsq2, x1, m1);
      __stcs(reinterpret_cast<uint32_t*>(dX + ((tb + tt) * 4 + a) * C + c),
             PackBf16(d0 + m0, d1 + m1));
    }
  }
  CpAsyncWait<0>();  // no copy may still target shared memory when the CTA exits
  float* part = partials + chunk * kLogits * K;
#pragma unroll
  for (int j = 0; j < kLogits; ++j) *reinterpret_cast<float2*>(part + j * K + i) = acc[j];
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

  using ColTr = mhc_cuda::BwdColumnsTraits;
  const dim3 col_grid(static_cast<unsigned>(p.C / ColTr::kColBlock), static_cast<unsigned>(chunks));
  mhc_cuda::MhcBwdColumnsKernel<<<col_grid, ColTr::kThreads, 0, stream>>>(
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
