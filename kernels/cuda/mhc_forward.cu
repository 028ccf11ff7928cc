// mHC forward on sm_90a: forward_stats (z = fn x on the tensor cores, then the per-token
// coefficients), forward_prepare (stats, then U) and forward_finish (Y).
//
// z_j = sum_i fn[j, i] x_i is a [T, 4C] x [4C, 24] product: 2 * 24 * 4C FLOPs a token, as many
// as the bytes of X are read, so FP32 FMAs would make it compute-bound. It runs on the BF16
// tensor cores instead: x is BF16 already, and fn is split as fn = hi + lo (two BF16 values,
// 16 significant bits, |fn - hi - lo| <= 2^-18 |fn|) so the 48 rows [hi; lo] times x, summed in
// FP32, give z to about FP32 accuracy. On the two-kernel path the split is done once per call
// (MhcFnSplitKernel, into the forward workspace) and the stats kernel stages it with cp.async, one
// chunk ahead; the cluster kernel splits its own register fragments.

#include <string>

#include "cakegrad/kernels/mhc.h"
#include "mhc_common.cuh"
#include "mhc_tensor_map.h"
#include "pdl_launch.h"
#include "per_device_memo.h"
#include "reference/mhc_layout.h"

namespace cakegrad::kernels {
namespace mhc_cuda {
namespace {

namespace lay = ::cakegrad::kernels::mhc_layout;

// kNTiles n8 token tiles per warp: 2 (64 tokens a CTA, fn re-read from L2 once per 64 tokens)
// for long inputs; 1 (32 tokens a CTA) when T is short and 64-token CTAs would leave SMs idle.
// Both give the same bits: a token's sums do not depend on its neighbours.
// fn's [hi; lo] rows of chunk k go to one of two shared buffers while chunk k - 1 is multiplied:
// before, each CTA converted fn per chunk between two block barriers, with the L2 latency of fn
// and the conversion exposed every chunk (H200, T = 16384: 0.224 -> 0.192 ms; T = 4096, where
// four warps an SM must hide it all: 0.200 -> 0.104 ms).
template <int kNTiles>
struct FwdStatsTraits {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kNTilesPerWarp = kNTiles;
  static constexpr int kTokensPerWarp = 8 * kNTilesPerWarp;
  static constexpr int kTokensPerCta = kWarps * kTokensPerWarp;
  static constexpr int kKChunk = 256;           // k per shared-memory stage (and per fresh
                                                // MMA accumulator)
  static constexpr int kGroups = kKChunk / 32;  // 32-k groups (16 B a lane)
  static constexpr int kRows = 2 * kLogits;     // [hi; lo] rows of fn
  static constexpr int kMTiles = kRows / 16;
  // 64 B of padding per row: a quarter-warp's 16-byte reads (rows g, g+1 x 4 column quads)
  // land in 8 distinct 16-byte bank groups.
  static constexpr int kRowStride = kKChunk + 32;     // BF16 elements
  static constexpr int kZStride = kTokensPerCta + 1;  // floats
  static constexpr int kFnTile = kRows * kRowStride;  // BF16 elements, one buffer
  static constexpr int kSmemBytes = 2 * kFnTile * 2;  // dynamic: two fn buffers
  static constexpr int kFnPiecesPerThread = kRows * kKChunk / 8 / kThreads;
  static_assert(kNTiles == 1 || kNTiles == 2, "register budget: one or two n8 tiles a warp");
  static_assert(kRows % 16 == 0, "48 rows must tile into m16 tiles");
  static_assert(1024 % kKChunk == 0, "4C is a multiple of 1024: chunks must divide it");
  static_assert(kKChunk % 32 == 0, "a chunk is a whole number of 32-k groups");
  static_assert(kFnPiecesPerThread * 8 * kThreads == kRows * kKChunk, "fn copies divide evenly");
  static_assert(kTokensPerCta <= kThreads, "one epilogue thread per token");
  static_assert((kRowStride * 2 / 16) % 8 == 4, "row stride must rotate bank groups by 4");
};

// fn split into [hi; lo] BF16 rows [48, 4C] (the forward workspace): hi = bf16(fn), lo =
// bf16(fn - hi), the operands of the stats kernel's MMAs.
constexpr int kSplitThreads = 256;
constexpr int kSplitMaxBlocks = 132 * 8;

// fn = hi + lo with hi = bf16(fn) and lo = fn - hi (BF16-rounded when packed): both stats paths
// take hi from here, so their A operands are the same bits.
__device__ __forceinline__ float FnHi(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

__global__ void __launch_bounds__(kSplitThreads)
    MhcFnSplitKernel(const float* __restrict__ fn, uint16_t* __restrict__ fn_split, int64_t K) {
  const int64_t n4 = kLogits * K / 4;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n4;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(fn) + k);
    const float vs[4] = {v.x, v.y, v.z, v.w};
    float hi[4], lo[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      hi[e] = FnHi(vs[e]);
      lo[e] = vs[e] - hi[e];
    }
    const int64_t row = 4 * k / K, col = 4 * k % K;
    *reinterpret_cast<uint2*>(fn_split + row * K + col) =
        make_uint2(PackBf16(hi[0], hi[1]), PackBf16(hi[2], hi[3]));
    *reinterpret_cast<uint2*>(fn_split + (kLogits + row) * K + col) =
        make_uint2(PackBf16(lo[0], lo[1]), PackBf16(lo[2], lo[3]));
  }
}

// hi (lo false) or lo (lo true) of the 8 values a and b, packed as 8 BF16: the cluster kernel
// splits its fragments itself.
__device__ __forceinline__ uint4 SplitFn8(float4 a, float4 b, bool lo) {
  const float vs[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  float o[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float hi = FnHi(vs[e]);
    o[e] = lo ? vs[e] - hi : hi;
  }
  return make_uint4(PackBf16(o[0], o[1]), PackBf16(o[2], o[3]), PackBf16(o[4], o[5]),
                    PackBf16(o[6], o[7]));
}

// r = 1 / rms(x) from sq = sum x^2 (both stats paths).
__device__ __forceinline__ float RmsInv(float sq, int64_t C, float rms_eps) {
  return 1.0f / sqrtf(sq / static_cast<float>(4 * C) + rms_eps);
}

// Per-token coefficients from z and sq, written as the 64-float stats record.
__device__ void WriteStats(const float* z, float sq, int64_t C, const float* scale,
                           const float* base, float rms_eps, float hc_eps, int iters,
                           float* stats) {
  const float r = RmsInv(sq, C, rms_eps);
  float rec[kMhcStatsWidth];
  float l[kLogits];
#pragma unroll
  for (int j = 0; j < kLogits; ++j) {
    rec[j] = r * z[j];
    l[j] = rec[j] * scale[Group(j)] + base[j];
  }
  rec[24] = r;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    rec[25 + a] = Sigmoid(l[a]) + hc_eps;
    rec[29 + a] = 2.0f * Sigmoid(l[4 + a]);
  }
  SinkhornForward(l + 8, hc_eps, iters, rec + 33);
#pragma unroll
  for (int k = 49; k < kMhcStatsWidth; ++k) rec[k] = 0.0f;
  float4* out = reinterpret_cast<float4*>(stats);
#pragma unroll
  for (int k = 0; k < kMhcStatsWidth / 4; ++k) {
    out[k] = make_float4(rec[4 * k], rec[4 * k + 1], rec[4 * k + 2], rec[4 * k + 3]);
  }
}

// One CTA per 64 tokens; each warp owns 16 tokens (two n8 tiles) over all of 4C.
//   A (m16 x k16) = rows of [fn_hi; fn_lo], staged per 256-k chunk in shared memory (double
//                   buffered, from the split copy).
//   B (k16 x n8)  = X^T: lane (g = lane/4, q = lane%4) loads 8 consecutive BF16 of token g with
//                   one 16-byte load. The dot products do not care in which order k is summed,
//                   so MMA k-slots {2q, 2q+1, 2q+8, 2q+9} of step s are mapped to the actual
//                   k = 8q + 4s + {0, 1, 2, 3}; A's fragments use the same map (one 16-byte
//                   shared load per row serves both steps).
template <int kNTiles>
__global__ void __launch_bounds__(FwdStatsTraits<kNTiles>::kThreads)
    MhcFwdStatsKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ fn_split,
                      const float* __restrict__ scale, const float* __restrict__ base,
                      float* __restrict__ stats, int64_t T, int64_t C, float rms_eps, float hc_eps,
                      int iters) {
  using Tr = FwdStatsTraits<kNTiles>;
  extern __shared__ __align__(16) uint16_t fn_buf[];  // [2][kFnTile]: chunk c in buffer c % 2
  __shared__ float z_s[Tr::kRows * Tr::kZStride];
  __shared__ float sq_s[Tr::kTokensPerCta];

  const int64_t K = 4 * C;
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q = lane % 4;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.x) * Tr::kTokensPerCta;

  const uint16_t* xrow[Tr::kNTilesPerWarp];
  bool xvalid[Tr::kNTilesPerWarp];
#pragma unroll
  for (int nt = 0; nt < Tr::kNTilesPerWarp; ++nt) {
    const int64_t t = tok0 + warp * Tr::kTokensPerWarp + nt * 8 + g;
    xvalid[nt] = t < T;
    xrow[nt] = X + (xvalid[nt] ? t : 0) * K + 8 * q;
  }

  // The tensor cores' FP32 accumulation truncates; summed over all of 4C that bias grew to
  // ~1e-5 relative at C = 4096 (measured on the H200). Each chunk therefore starts fresh MMA
  // accumulators, and chunk sums are added here with round-to-nearest FP32 adds.
  float acc[Tr::kMTiles][Tr::kNTilesPerWarp][4] = {};
  float sq[Tr::kNTilesPerWarp] = {};

  auto fn_chunk = [&](int64_t kc) { return fn_buf + ((kc / Tr::kKChunk) & 1) * Tr::kFnTile; };
  auto stage_fn = [&](int64_t kc) {
    uint16_t* dst = fn_chunk(kc);
#pragma unroll
    for (int it = 0; it < Tr::kFnPiecesPerThread; ++it) {
      const int f = tid + it * Tr::kThreads;
      const int row = f / (Tr::kKChunk / 8), col = 8 * (f % (Tr::kKChunk / 8));
      CpAsync<16>(dst + row * Tr::kRowStride + col, fn_split + row * K + kc + col);
    }
    CpAsyncCommit();
  };
  stage_fn(0);

  for (int64_t kc = 0; kc < K; kc += Tr::kKChunk) {
    // Issue this chunk's X loads before staging fn so both are in flight together.
    uint4 xr[Tr::kNTilesPerWarp][Tr::kGroups];
#pragma unroll
    for (int nt = 0; nt < Tr::kNTilesPerWarp; ++nt) {
#pragma unroll
      for (int gi = 0; gi < Tr::kGroups; ++gi) {
        xr[nt][gi] = xvalid[nt] ? __ldcs(reinterpret_cast<const uint4*>(xrow[nt] + kc + 32 * gi))
                                : make_uint4(0, 0, 0, 0);
      }
    }
    // Pull the next chunk of this warp's rows into L2 now (no registers held), so next
    // iteration's loads wait for L2 rather than DRAM.
    if (lane < Tr::kTokensPerWarp && kc + Tr::kKChunk < K) {
      const int64_t t = tok0 + warp * Tr::kTokensPerWarp + lane;
      if (t < T) PrefetchL2(X + t * K + kc + Tr::kKChunk, Tr::kKChunk * 2);
    }
    CpAsyncWait<0>();  // this thread's pieces of chunk kc
    __syncthreads();   // everyone's pieces landed; everyone is done with chunk kc - 1's buffer
    if (kc + Tr::kKChunk < K) stage_fn(kc + Tr::kKChunk);
    const uint16_t* fn_s = fn_chunk(kc);
    float part[Tr::kMTiles][Tr::kNTilesPerWarp][4] = {};
#pragma unroll
    for (int gi = 0; gi < Tr::kGroups; ++gi) {
      uint4 ar[Tr::kMTiles][2];
#pragma unroll
      for (int mt = 0; mt < Tr::kMTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          ar[mt][h] = *reinterpret_cast<const uint4*>(
              &fn_s[(16 * mt + g + 8 * h) * Tr::kRowStride + 32 * gi + 8 * q]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < Tr::kNTilesPerWarp; ++nt) {
        const uint4 b = xr[nt][gi];
        float xf[8];
        Unpack8(b, xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) sq[nt] = fmaf(xf[e], xf[e], sq[nt]);
#pragma unroll
        for (int mt = 0; mt < Tr::kMTiles; ++mt) {
          MmaBf16(part[mt][nt], ar[mt][0].x, ar[mt][1].x, ar[mt][0].y, ar[mt][1].y, b.x, b.y);
          MmaBf16(part[mt][nt], ar[mt][0].z, ar[mt][1].z, ar[mt][0].w, ar[mt][1].w, b.z, b.w);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < Tr::kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < Tr::kNTilesPerWarp; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] += part[mt][nt][e];
      }
    }
  }

  // D fragment: rows 16mt + g (+8), columns (tokens) 2q, 2q + 1 of the n-tile.
#pragma unroll
  for (int mt = 0; mt < Tr::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < Tr::kNTilesPerWarp; ++nt) {
      const int col = warp * Tr::kTokensPerWarp + nt * 8 + 2 * q;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = 16 * mt + g + 8 * (e / 2);
        z_s[row * Tr::kZStride + col + (e % 2)] = acc[mt][nt][e];
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < Tr::kNTilesPerWarp; ++nt) {
    float s = sq[nt];
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    if (q == 0) sq_s[warp * Tr::kTokensPerWarp + nt * 8 + g] = s;
  }
  __syncthreads();
  if (tid < Tr::kTokensPerCta && tok0 + tid < T) {
    float z[kLogits];
#pragma unroll
    for (int j = 0; j < kLogits; ++j) {
      z[j] = z_s[j * Tr::kZStride + tid] + z_s[(kLogits + j) * Tr::kZStride + tid];
    }
    WriteStats(z, sq_s[tid], C, scale, base, rms_eps, hc_eps, iters,
               stats + (tok0 + tid) * kMhcStatsWidth);
  }
}

// From this T on, 64-token CTAs (two resident per SM by registers) number about two per SM of an
// H200 (132 SMs); below it 32-token CTAs keep more SMs busy.
constexpr int64_t kLongT = 256 * FwdStatsTraits<2>::kTokensPerCta;

// Streaming kernels: one thread per (token, 8 channels), 16-byte accesses.
constexpr int kStreamThreads = 256;

__global__ void __launch_bounds__(kStreamThreads)
    MhcFwdUKernel(const uint16_t* __restrict__ X, const float* __restrict__ stats,
                  uint16_t* __restrict__ U, int64_t T, int64_t C) {
  const int64_t c8s = C / 8;
  const int64_t n = T * c8s;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / c8s, c = 8 * (idx % c8s);
    const float4 pre = __ldg(reinterpret_cast<const float4*>(stats + t * kMhcStatsWidth + 24) +
                             0);  // [24..27]: r, pre0, pre1, pre2
    const float pre3 = __ldg(stats + t * kMhcStatsWidth + 28);
    const float p[4] = {pre.y, pre.z, pre.w, pre3};
    float u[8], xf[8];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      Unpack8(__ldcs(reinterpret_cast<const uint4*>(X + (t * 4 + a) * C + c)), xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) u[e] = a == 0 ? p[0] * xf[e] : fmaf(p[a], xf[e], u[e]);
    }
    __stcs(reinterpret_cast<uint4*>(U + t * C + c), Pack8(u));
  }
}

__global__ void __launch_bounds__(kStreamThreads)
    MhcFwdFinishKernel(const uint16_t* __restrict__ X, const uint16_t* __restrict__ B,
                       const float* __restrict__ stats, uint16_t* __restrict__ Y, int64_t T,
                       int64_t C) {
  const int64_t c8s = C / 8;
  const int64_t n = T * c8s;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / c8s, c = 8 * (idx % c8s);
    const float* st = stats + t * kMhcStatsWidth;
    float xf[4][8], bf[8];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      Unpack8(__ldcs(reinterpret_cast<const uint4*>(X + (t * 4 + a) * C + c)), xf[a]);
    }
    Unpack8(__ldcs(reinterpret_cast<const uint4*>(B + t * C + c)), bf);
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const float post = __ldg(st + 29 + b);
      float rb[4];
#pragma unroll
      for (int a = 0; a < 4; ++a) rb[a] = __ldg(st + 33 + 4 * a + b);
      float y[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float v = post * bf[e];
#pragma unroll
        for (int a = 0; a < 4; ++a) v = fmaf(rb[a], xf[a][e], v);
        y[e] = v;
      }
      __stcs(reinterpret_cast<uint4*>(Y + (t * 4 + b) * C + c), Pack8(y));
    }
  }
}

// One-pass forward for C = 1024 kG (kG in 1..4; C = 4096 at kG = 4) on clusters of 16 CTAs.
// The stats kernel above re-reads fn's split from L2 once per 64-token CTA and forward_prepare
// then reads X a second time for U; here each byte of X and fn is read once:
//   - CTA r of a cluster owns the channels [r C/16, (r + 1) C/16) of each of the 4 streams, i.e.
//     a 4C/16 k-slice, and warp w (8 a CTA) owns C/32 of its k (stream w / 2, half w % 2). The
//     warp keeps the A fragments of [fn_hi; fn_lo] for its k in registers for the whole kernel
//     (24 kG registers), split from fn once (SplitFn8).
//   - The cluster walks 32-token stages (its share of ceil(T / 32)); each CTA streams its X
//     slice of a stage (32 tokens x 4 x C/16 BF16, 64 KB at C = 4096) with kG swizzled tensor
//     copies (64 channels each) into one of kStages shared buffers, two stages ahead.
//   - Per stage each warp multiplies its k on the tensor cores (fresh accumulators: at most 128 k
//     per warp, so the MMA's truncating FP32 accumulation never runs long), adds hi + lo, and
//     gets sq from the same MMAs (the diagonal of x x^T). The CTA sums its 8 warps in order.
//   - forward_prepare (kWithU): 8 more warps of each CTA (the U warps) sum the 16 CTA partials
//     through distributed shared memory in rank order. CTA r sums all 24 z and sq of its 2
//     tokens, whose m = r z and r it writes to stats; every CTA also sums z_0..3 and sq of all 32
//     tokens, computes pre from them and writes U for its channels from the X still in shared
//     memory, while the 8 MMA warps go on with the next stage. The partials are double-buffered
//     by stage parity, and the one cluster barrier a stage is split so that the next stage's MMAs
//     run between its arrive and its wait (see the pipeline below).
//   - forward_stats (split-K, without U): the same CTAs without the cluster, CTA b playing rank
//     b % 16 of cluster b / 16 on its own stages. Its CTA sums go to the forward workspace, and
//     MhcFwdCoefKernel<.., true> sums each token's 16 in rank order: the same sums in the same
//     order, so the same bits as forward_prepare's stats, with no cluster barrier a stage and on
//     every SM (a 16-CTA cluster fits 7 times on the H200: 112 of its 132 SMs). H200, T = 16384
//     / 4096: 0.183 -> 0.163 / 0.063 -> 0.053 ms (the cluster form without U, which summed a
//     token's 16 partials in the cluster: bench/results/mhc_h200.md, twenty-third session); then
//     0.154 ms with tensor maps without L2 promotion (tensor_map.h) and 0.152 with the
//     coefficient kernel launched programmatically (twenty-fourth session).
// The rest of the record (pre, post, Sinkhorn; zeros) is MhcFwdCoefKernel's, 16 lanes a token.
// Token sums do not depend on the stage, cluster or grid size: stats are the same bits with or
// without U and for any number of resident clusters or split-K CTAs.
// The tuning measured on the H200 (sixth session; bench/results/mhc_h200.md has the numbers):
// 32-token stages through 3 buffers (16-token stages were slower); 2 warps a stream, 8 a CTA (16
// were slower, and racecheck flagged their paired sums); the relaxed arrive (one release by warp 0
// after a block barrier: faster forward_stats, equal forward_prepare); sq on the tensor cores,
// unpadded swizzled warp partials summed 4 tokens a thread, and two n8 token tiles a step
// (together 0.239 -> 0.206 ms stats, 0.337 -> 0.309 ms prepare at T = 16384); with U, U
// written by 4 warps of its own (helper mhc12: prepare 0.307 -> 0.287 ms at T = 16384, 0.097 ->
// 0.092 at T = 4096); with U, the release arrive by the last MMA warp and pre computed by the U
// warps, so that no MMA warp does more than multiply and sum between its block barriers (helper
// mhc14, from an ncu profile: prepare 0.289 -> 0.242 ms at T = 16384, 0.093 -> 0.079 at 4096);
// with U, registers moved from the U warps to the MMA warps (setmaxnreg) and the cluster sum's
// DSMEM loads overlapped with the next stage's CTA sum (helper mhc15: 0.2426 -> 0.2383 ms at
// T = 16384); with U, the cluster sums moved to 8 U warps (fortieth session, mhc95: 0.2302 ->
// 0.2219 ms at T = 16384, 0.0759 -> 0.0740 at 4096).
template <int kG>
struct FwdClusterTraits {
  static constexpr int kCtas = 16;
  static constexpr int kSplit = 2;  // warps sharing a stream's C/16 channels
  static constexpr int kTilesAStep = 2;
  static constexpr int kWarps = 4 * kSplit;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kStageTok = 32;
  static constexpr int kStages = 3;
  static constexpr int kNTiles = kStageTok / 8;     // n8 token tiles of a stage
  static constexpr int kMTiles = 2 * kLogits / 16;  // [hi; lo] rows in m16 tiles
  static constexpr int kGroups = 2 * kG / kSplit;   // 32-k groups a warp
  static constexpr int64_t kC = 1024 * kG;
  static constexpr int kSliceCh = 64 * kG;             // channels of a stream a CTA owns
  static constexpr int kRowChunks = 4 * kSliceCh / 8;  // 16-byte chunks of a token's slice
  static constexpr int kStreamChunks = kRowChunks / 4;
  static constexpr int kWarpChunks = kStreamChunks / kSplit;  // kGroups 32-k groups
  static constexpr int kRowBytes = 16 * kRowChunks;
  static constexpr int kStageBytes = kStageTok * kRowBytes;
  // A stage lands as kBoxes tensor copies of 64 channels (128 bytes: the span of
  // CU_TENSOR_MAP_SWIZZLE_128B) x kBoxRows rows (row 4 tok + stream), box j holding the slice's
  // 16-byte chunks 8j..8j+7 of every row, chunk c of row r stored at chunk c ^ (r % 8) of its
  // 128-byte line (the swizzle, on 1024-byte aligned boxes). One dense box of 512-byte rows put
  // the MMA warps' token rows 2 KB apart, on the same banks: a quarter-warp's 16-byte loads (tokens
  // g, g + 1 x 4 chunks) took two wavefronts (ncu, H200, T = 16384: 25% of the with-U kernel's
  // shared wavefronts were excess, helper mhc15). With the XOR, tokens g and g + 1 (rows 4 apart)
  // read chunk sets that differ in bit 2: 8 distinct 16-byte bank groups (helper mhc16, H200,
  // T = 16384: the multiply's bank conflicts 4.3 M -> 0.09 M; forward_prepare 0.2407 -> 0.2356
  // ms, forward_stats 0.1893 -> 0.1865 ms).
  static constexpr int kBoxCh = 64;
  static constexpr int kBoxes = kSliceCh / kBoxCh;
  static constexpr int kBoxRows = 4 * kStageTok;
  static constexpr int kLineBytes = 2 * kBoxCh;  // one row of a box
  static constexpr int kBoxBytes = kBoxRows * kLineBytes;
  static constexpr int kVals = kLogits + 1;  // z_0..23, sq
  // floats; unpadded rows with an XOR swizzle (see wp_index).
  static constexpr int kWStride = kStageTok;
  static constexpr int kWpartFloats = kWarps * kVals * kWStride;
  static constexpr int kCpartFloats = kVals * kStageTok;  // one parity
  // cpart's float of value v of stage token tok, [v][tok]: the CTA sums store 4 tokens as a float4
  // and the U warps' cluster sums read consecutive tokens.
  static constexpr int CpIndex(int v, int tok) { return v * kStageTok + tok; }
  static constexpr int kOwnTok = kStageTok / kCtas;
  static constexpr int kZsFloats = 5 * kStageTok + (kLogits - 4) * kOwnTok;
  // With U: the U warps' pre (4 kStageTok).
  static constexpr int kUFloats = 4 * kStageTok;
  static constexpr int kSmemBytes =
      kStages * kStageBytes + (kWpartFloats + 2 * kCpartFloats + kZsFloats + kUFloats) * 4;
  static constexpr int kChunksPerThread = kStageTok * kRowChunks / kThreads;
  // With U: warps that sum the stage over the cluster, compute pre and write U, beside the
  // kWarps that multiply and sum their CTA. U of stage s then runs while the other warps multiply
  // stage s + 1, rather than between their block barriers; its inputs (the CTA sums, the X slice)
  // stay in shared memory until it is written. History (H200, T = 16384, prepare): two U warps
  // were slower than none (0.335 vs 0.307 ms: the X buffer of a stage is refilled only after
  // its U); pre moved from MMA warp 0 to the U warps, 0.267 -> 0.242 ms (helper mhc14); the
  // cluster sums moved from the MMA warps (a quarter of their samples, prof94) to 8 U warps,
  // 0.2302-0.2320 -> 0.2219-0.2226 ms (mhc95: with 4 U warps the same move was 2.6% slower, and
  // 8 U warps without it changed nothing, mhc93; bench/results/mhc_h200.md, fortieth session).
  static constexpr int kUWarps = 8;
  static constexpr int kUThreads = 32 * kUWarps;
  // With U, registers a thread after setmaxnreg: of the CTA's 512 x 128, the U warps give up 56 a
  // thread and the MMA warps take 56 (184 next to the 96 registers of fn's fragments). With 4 U
  // warps and the cluster sums in the MMA warps (helper mhc15, H200, T = 16384, prepare; main
  // then 0.2426 ms): MMA / U 184 / 136 0.2383; 200 / 104 0.2454; 200 / 104 with four n8 token
  // tiles a multiply step (twice the independent MMA chains, 32 more accumulator registers, a
  // 24-56 byte spill) 0.3085.
  static constexpr int kMmaRegs = 184;
  static constexpr int kURegs = 72;
  static constexpr int kLaunchRegs = 65536 / (kThreads + kUThreads) / 8 * 8;  // 128
  static_assert(kMmaRegs * kThreads + kURegs * kUThreads <= kLaunchRegs * (kThreads + kUThreads),
                "the MMA warps take only what the U warps give back");
  static_assert(kMmaRegs % 8 == 0 && kURegs % 8 == 0, "setmaxnreg takes multiples of 8");
  static_assert(kVals <= 32, "one lane a value in the own-token sums");
  static_assert(kG >= 1 && kG <= 4, "fn fragments take 48 kG / kSplit registers");
  static_assert(kStageTok % kCtas == 0, "each CTA owns whole tokens of a stage");
  static_assert(kChunksPerThread * kThreads == kStageTok * kRowChunks, "copies divide evenly");
  static_assert(kBoxes * kBoxBytes == kStageBytes, "a stage is whole boxes");
  static_assert(kBoxRows <= 256, "a tensor copy's box has at most 256 rows");
  static_assert(kBoxBytes % 1024 == 0 && kStageBytes % 1024 == 0,
                "boxes start on the 128-byte swizzle's 1024-byte period");
  static_assert(kWarpChunks % 8 == 0, "a warp's k is whole boxes (kG even)");
  static_assert((kUThreads / kStreamChunks) % 2 == 0, "a U thread's tokens keep one row parity");
  // The dynamic buffer starts 1024-byte aligned, after up to 1 KB of static shared memory.
  static_assert(kSmemBytes + 1024 <= 227 * 1024, "shared memory of one CTA with the alignment");
  static_assert(kWarpChunks % 4 == 0, "a warp's k is whole 32-k groups");
  static_assert(kNTiles % kTilesAStep == 0, "token tiles are multiplied kTilesAStep at a time");
  static_assert(kStageTok == 32, "the swizzle of wpart assumes 32-token rows");
  static_assert(5 * kStageTok + (kLogits - 4) * kOwnTok <= kUThreads, "one U thread a cluster sum");
  static_assert(kUThreads % kStreamChunks == 0, "a U thread keeps its channel chunk");
  static constexpr int kPreThreads = 4 * kStageTok;  // one pre item (stream, token) each
  static_assert(kPreThreads <= kUThreads, "the first U threads compute pre");
  static_assert(kStageTok * kStreamChunks % kUThreads == 0, "U items divide over the U warps");
  static_assert(kStreamChunks == 32, "a U warp writes one token's slice a step");
};

// The U warps of the with-U cluster kernel (utid: thread index among them). Per stage, once the
// cluster barrier's phase s completes (every CTA's CTA sums of stage s are in its cpart), they
// sum the 16 CTAs' partials in rank order through distributed shared memory (z_0..3 and sq of
// every token, z_4..23 of this CTA's own tokens), arrive for phase s + 1 (after which the MMA
// warps may reuse that cpart parity), compute pre (the coefficient kernel's expression: the same
// bits) and m, r of the own tokens for stats, write U from the X slice and refill the X buffer
// with stage s + kStages. The MMA warps thus only multiply and sum their CTA: the cluster sums
// were theirs, a quarter of their time (bench/results/mhc_h200.md, fortieth session, prof94).
// The same products in the same a-order as before: the same bits. (Reading X from global memory
// (L2) instead, so that the MMA warps could refill the buffer right after its MMAs, was slower:
// 0.348 vs 0.289 ms at T = 16384, H200, helper mhc14.)
template <typename Tr>
__device__ void FwdUWarps(const CUtensorMap* xmap, const unsigned char* xbuf, uint64_t* full_bar,
                          uint32_t cpart_s, float* zs, float* pre, float* __restrict__ stats,
                          uint16_t* __restrict__ U, int64_t T, int64_t cluster, int64_t nclusters,
                          int64_t nstages, int rank, const float* __restrict__ scale,
                          const float* __restrict__ base, float rms_eps, float hc_eps, int utid) {
  constexpr int64_t C = Tr::kC;
  const int64_t ch0 = static_cast<int64_t>(rank) * Tr::kSliceCh;
  constexpr int kItems = Tr::kStageTok * Tr::kStreamChunks / Tr::kUThreads;  // U items a thread
  // Items loaded before any is used, so that their shared loads overlap (8 a batch measured no
  // faster, with named-barrier hand-overs).
  constexpr int kBatch = 2;
  static_assert(kItems % kBatch == 0, "U items in whole batches");
  const int c8 = utid % Tr::kStreamChunks;
  // Item it's token is utid / kStreamChunks + (kUThreads / kStreamChunks) k: its rows 4 tok + a
  // keep this thread's parity p of tok, so the swizzled chunk (c8 % 8) ^ (4 p + a) is this
  // thread's (c8 % 8) ^ 4p XOR a, and each quarter-warp (one box line) still reads 8 distinct
  // chunks. xo: the offset of stream 0's chunk of the thread's first token.
  const int tok0 = utid / Tr::kStreamChunks;
  const int xo =
      (c8 / 8) * Tr::kBoxBytes + 4 * tok0 * Tr::kLineBytes + 16 * ((c8 % 8) ^ (4 * (tok0 & 1)));
  // This thread's pre item: stream utid / kStageTok, token utid % kStageTok.
  const float scale0 = scale[0];
  const float bpre = base[(utid % Tr::kPreThreads) / Tr::kStageTok];
  // The cluster sums of a stage, in rank order, one a thread: item i < 5 kStageTok is z_0..3 or
  // sq (i / kStageTok = 4) of stage token i % kStageTok, for pre; the next (kLogits - 4) kOwnTok
  // are z_4..23 of this CTA's own tokens, for their stats. zs holds them in that order.
  constexpr int kSumItems = 5 * Tr::kStageTok + (kLogits - 4) * Tr::kOwnTok;
  int sum_v = -1, sum_tok = 0;
  if (utid < 5 * Tr::kStageTok) {
    sum_v = utid / Tr::kStageTok < 4 ? utid / Tr::kStageTok : kLogits;
    sum_tok = utid % Tr::kStageTok;
  } else if (utid < kSumItems) {
    const int i = utid - 5 * Tr::kStageTok;
    sum_v = 4 + i / Tr::kOwnTok;
    sum_tok = rank * Tr::kOwnTok + i % Tr::kOwnTok;
  }
  auto zs_all = [](int v, int tok) { return (v < 4 ? v : 4) * Tr::kStageTok + tok; };
  auto zs_own = [](int v, int i) { return 5 * Tr::kStageTok + (v - 4) * Tr::kOwnTok + i; };
  auto own_val = [&](int v, int i) {
    return v < 4 || v == kLogits ? zs[zs_all(v, rank * Tr::kOwnTok + i)] : zs[zs_own(v, i)];
  };
  ClusterArriveRelaxed();
  for (int64_t s = 0; s < nstages; ++s) {
    const int64_t t0 = (cluster + s * nclusters) * Tr::kStageTok;
    ClusterWait();  // every CTA's sums of stage s are in its cpart parity s % 2
    if (sum_v >= 0) {
      const uint32_t addr = cpart_s + 4u * static_cast<uint32_t>((s & 1) * Tr::kCpartFloats +
                                                                 Tr::CpIndex(sum_v, sum_tok));
      float p[Tr::kCtas];
#pragma unroll
      for (int r = 0; r < Tr::kCtas; ++r) p[r] = LdsClusterF32(MapaShared(addr, r));
      float sum = p[0];
#pragma unroll
      for (int r = 1; r < Tr::kCtas; ++r) sum += p[r];
      zs[utid] = sum;
    }
    // After the sums, which consumed every loaded value: the MMA warps may overwrite parity
    // s % 2 with stage s + 2 once every CTA's U warps have arrived here.
    ClusterArriveRelaxed();
    NamedBarrierSync(2, Tr::kUThreads);  // zs holds the stage's sums
    if (utid < Tr::kPreThreads) {
      const float zv = zs[utid], sqv = zs[4 * Tr::kStageTok + utid % Tr::kStageTok];
      const float r = RmsInv(sqv, C, rms_eps);
      const float m = r * zv;
      pre[utid] = Sigmoid(fmaf(m, scale0, bpre)) + hc_eps;
    }
    // m and r of this CTA's own tokens (the rest of the record is the coefficient kernel's).
    if (utid < Tr::kVals * Tr::kOwnTok) {
      const int own = utid / Tr::kVals, v = utid % Tr::kVals;
      const int64_t t = t0 + rank * Tr::kOwnTok + own;
      if (t < T) {
        const float r = RmsInv(own_val(kLogits, own), C, rms_eps);
        stats[t * kMhcStatsWidth + v] = v < kLogits ? r * own_val(v, own) : r;
      }
    }
    NamedBarrierSync(2, Tr::kUThreads);  // pre of the stage written
    // Already complete (the MMA warps saw it); makes the tensor copy's data visible here.
    MbarWait(&full_bar[s % Tr::kStages], static_cast<uint32_t>((s / Tr::kStages) & 1));
    const unsigned char* xs = xbuf + (s % Tr::kStages) * Tr::kStageBytes;
#pragma unroll
    for (int b0 = 0; b0 < kItems; b0 += kBatch) {
      uint4 xr[kBatch][4];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const unsigned char* row =
            xs + 4 * ((b0 + b) * (Tr::kUThreads / Tr::kStreamChunks)) * Tr::kLineBytes;
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          xr[b][a] = *reinterpret_cast<const uint4*>(row + a * Tr::kLineBytes + (xo ^ (16 * a)));
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int tok = (utid + (b0 + b) * Tr::kUThreads) / Tr::kStreamChunks;
        const int64_t t = t0 + tok;
        float u[8], xf[8];
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          const float p = pre[a * Tr::kStageTok + tok];
          Unpack8(xr[b][a], xf);
#pragma unroll
          for (int e = 0; e < 8; ++e) u[e] = a == 0 ? p * xf[e] : fmaf(p, xf[e], u[e]);
        }
        if (t < T) __stcs(reinterpret_cast<uint4*>(U + t * C + ch0 + 8 * c8), Pack8(u));
      }
    }
    NamedBarrierSync(2, Tr::kUThreads);  // done with the X buffer, pre and zs
    if (utid == 0) {
      const int64_t sn = s + Tr::kStages;
      if (sn < nstages) {
        const int b = static_cast<int>(sn % Tr::kStages);
        MbarArriveExpectTx(&full_bar[b], Tr::kStageBytes);
#pragma unroll
        for (int j = 0; j < Tr::kBoxes; ++j) {
          TmaLoad2D(SmemAddr(xbuf + b * Tr::kStageBytes + j * Tr::kBoxBytes), xmap,
                    static_cast<int>(ch0) + j * Tr::kBoxCh,
                    static_cast<int>(4 * (cluster + sn * nclusters) * Tr::kStageTok),
                    SmemAddr(&full_bar[b]));
        }
      }
    }
  }
  ClusterWait();
}

// Stages cluster `cluster` walks: the kStageTok-token groups cluster, cluster + nclusters, ...
template <typename Tr>
__device__ __forceinline__ int64_t ClusterStages(int64_t T, int64_t cluster, int64_t nclusters) {
  const int64_t ngroups = (T + Tr::kStageTok - 1) / Tr::kStageTok;
  return cluster < ngroups ? (ngroups - cluster + nclusters - 1) / nclusters : 0;
}

template <typename Tr, bool kWithU>
__global__ void __launch_bounds__(Tr::kThreads + (kWithU ? Tr::kUThreads : 0), 1)
    MhcFwdClusterKernel(const __grid_constant__ CUtensorMap xmap, const float* __restrict__ fn,
                        const float* __restrict__ scale, const float* __restrict__ base,
                        float* __restrict__ stats, uint16_t* __restrict__ U, int64_t T,
                        float rms_eps, float hc_eps, float* __restrict__ partials,
                        int64_t part_tokens) {
  constexpr int kG = Tr::kGroups;  // 32-k groups of this warp
  constexpr int64_t C = Tr::kC;
  constexpr int64_t K = 4 * C;
  // 1024-byte aligned: the swizzle pattern of a box follows its shared address bits 7..9.
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ uint64_t full_bar[Tr::kStages];  // stage landed, per buffer
  unsigned char* xbuf = smem;                 // [kStages][kBoxes][kBoxRows][kLineBytes]
  float* wpart = reinterpret_cast<float*>(smem + Tr::kStages * Tr::kStageBytes);
  float* cpart = wpart + Tr::kWpartFloats;  // [2][kVals][kStageTok], read by the cluster
  // wpart holds the next stage's warp partials while the U warps sum this stage's CTA sums.
  float* zs = cpart + 2 * Tr::kCpartFloats;  // [kZsFloats]: see zs_all, zs_own
  float* pre_u = zs + Tr::kZsFloats;  // with U: [4][kStageTok], written and read by the U warps

  const int tid = threadIdx.x;
  // Barriers are initialized first, on a branch of their own. Initialized after fn's loads (as
  // without U until the eleventh session), nvcc predicated the init on tid == 0 inside a uniform
  // loop, and compute-sanitizer's racecheck counted the predicated-off init of the other warps as
  // writes to the stale address in their uniform register: 33 false RAW hazards on X buffers
  // (H200, MhcKernels.SanitizeSmall, --racecheck-report all; the build before mhc-s16 reported 0).
  if (tid == 0) {
    for (int b = 0; b < Tr::kStages; ++b) MbarInit(&full_bar[b], 1);
    MbarInitFence();
  }
  if constexpr (kWithU) {
    __syncthreads();
    // Registers move from the U warps to the MMA warps (see kMmaRegs). Each side computes its
    // launch values after the setmaxnreg: computed before it, ptxas spilled them across it.
    if (tid >= Tr::kThreads) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Tr::kURegs));
      const int64_t cluster = ClusterId(), nclusters = ClusterCount();
      const int64_t nstages = ClusterStages<Tr>(T, cluster, nclusters);
      FwdUWarps<Tr>(&xmap, xbuf, full_bar, SmemAddr(cpart), zs, pre_u, stats, U, T, cluster,
                    nclusters, nstages, static_cast<int>(ClusterCtaRank()), scale, base, rms_eps,
                    hc_eps, tid - Tr::kThreads);
      return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Tr::kMmaRegs));
  }
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q = lane % 4;
  // Without U (split-K) CTA b plays rank b % kCtas of cluster b / kCtas.
  const int rank =
      kWithU ? static_cast<int>(ClusterCtaRank()) : static_cast<int>(blockIdx.x % Tr::kCtas);
  const int64_t cluster = kWithU ? ClusterId() : blockIdx.x / Tr::kCtas;
  const int64_t nclusters = kWithU ? ClusterCount() : gridDim.x / Tr::kCtas;
  const int64_t nstages = ClusterStages<Tr>(T, cluster, nclusters);
  const int stream = warp / Tr::kSplit, part = warp % Tr::kSplit;
  const int64_t ch0 = static_cast<int64_t>(rank) * Tr::kSliceCh;  // first channel of the slice

  // A fragments, as in MhcFwdStatsKernel: MMA k-slots {2q, 2q+1, 2q+8, 2q+9} of step s of
  // 32-k group gi hold k = 32 gi + 8q + 4s + {0, 1, 2, 3} of the warp's k. Split here from fn
  // itself (row j of [hi; lo] is hi of fn row j for j < 24, else lo of row j - 24; the same bits
  // as MhcFnSplitKernel's copy, by SplitFn8): the same bytes as reading the split copy, and the
  // call no longer launches a split kernel before this one (H200, C = 4096, helper mhc18:
  // forward_stats 0.1861 -> 0.1844 ms at T = 16384, 0.0645 -> 0.0624 at T = 4096; forward_prepare
  // 0.2352 -> 0.2325 and 0.0780 -> 0.0762; stats and U bitwise unchanged).
  uint4 fa[kG][Tr::kMTiles][2];
  {
    const int64_t kw = stream * C + ch0 + part * (Tr::kSliceCh / Tr::kSplit);
#pragma unroll
    for (int gi = 0; gi < kG; ++gi) {
#pragma unroll
      for (int mt = 0; mt < Tr::kMTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = 16 * mt + g + 8 * h;
          const bool lo = 16 * mt + 8 * h >= kLogits;  // the same for every g
          const float* src = fn + (lo ? row - kLogits : row) * K + kw + 32 * gi + 8 * q;
          fa[gi][mt][h] = SplitFn8(__ldg(reinterpret_cast<const float4*>(src)),
                                   __ldg(reinterpret_cast<const float4*>(src) + 1), lo);
        }
      }
    }
  }

  // kBoxes tensor copies a stage: boxes {64 channels, 4 streams x kStageTok tokens} of X viewed
  // as [4T, C], each landing as [token][stream] rows of 64 channels, swizzled (see kBoxCh); rows
  // past 4T are zero-filled, so tokens past T give zero sums (never written).
  if constexpr (!kWithU) __syncthreads();  // the barriers' init, before the first copy
  auto stage_x = [&](int64_t s) {
    if (tid != 0 || s >= nstages) return;
    const int64_t t0 = (cluster + s * nclusters) * Tr::kStageTok;
    const int b = static_cast<int>(s % Tr::kStages);
    MbarArriveExpectTx(&full_bar[b], Tr::kStageBytes);
#pragma unroll
    for (int j = 0; j < Tr::kBoxes; ++j) {
      if constexpr (!kWithU) {
        // X is read once: it should not push the partials (evict last, below) out of L2.
        TmaLoad2DHint(SmemAddr(xbuf + b * Tr::kStageBytes + j * Tr::kBoxBytes), &xmap,
                      static_cast<int>(ch0) + j * Tr::kBoxCh, static_cast<int>(4 * t0),
                      SmemAddr(&full_bar[b]), CreateL2PolicyEvictFirst());
      } else {
        TmaLoad2D(SmemAddr(xbuf + b * Tr::kStageBytes + j * Tr::kBoxBytes), &xmap,
                  static_cast<int>(ch0) + j * Tr::kBoxCh, static_cast<int>(4 * t0),
                  SmemAddr(&full_bar[b]));
      }
    }
  };
  const uint32_t cpart_s = SmemAddr(cpart);

  float own[Tr::kNTiles][7];
  // wpart's float of value v (z_0..23, sq) and stage token tok in a warp's slot: rows of 32
  // floats with token bits 3..4 XORed with v's bits 0..1, so that a warp's float2 fragment stores
  // (rows 8j + g, columns 8nt + 2q) hit a bank at most twice and the float4 reads of the CTA sum
  // (a quarter-warp reads one row) do not conflict.
  auto wp_index = [](int v, int tok) { return v * Tr::kWStride + (tok ^ ((v & 3) << 3)); };
  // The lane that holds sq of token g of a tile: the MMA's diagonal element (g, g).
  const bool sq_lane = q == (g >> 1);
  // The lane's X chunk q of row 4 g + stream (token g of tile 0) in a box line, swizzled: rows
  // 4 (8 nt + g) + stream of every token tile nt have the same row % 8 = 4 (g % 2) + stream.
  const int xo = (4 * g + stream) * Tr::kLineBytes + 16 * (q ^ (4 * (g & 1) + stream));
  // Stage s's MMAs: each warp's partial z (hi + lo) and sq of its k, into wpart.
  auto multiply = [&](int64_t s) {
    MbarWait(&full_bar[s % Tr::kStages], static_cast<uint32_t>((s / Tr::kStages) & 1));
    const unsigned char* xs = xbuf + (s % Tr::kStages) * Tr::kStageBytes;
    // warp < kWarps already; the modulo is the form the measured build compiled (without it nvcc
    // allocates registers differently, and that code has not run on the device).
    float* wp = wpart + (warp % Tr::kWarps) * Tr::kVals * Tr::kWStride;
    // kN n8 token tiles at a time: kN independent chains of MMAs (12 kN accumulators live next to
    // fn's 24 kG registers; kG: this warp's 32-k groups).
    // Split-K (no U warps to leave registers to): all 4 tiles at once, twice the independent MMA
    // chains (216 registers, no spill; H200: forward_stats -0.3% at T = 16384, -0.6% at 8192).
    constexpr int kN = kWithU ? Tr::kTilesAStep : Tr::kNTiles;
#pragma unroll
    for (int n0 = 0; n0 < Tr::kNTiles; n0 += kN) {
      float acc[kN][Tr::kMTiles][4] = {};
      float sqa[kN][4] = {};  // sq's MMA accumulators
#pragma unroll
      for (int gi = 0; gi < kG; ++gi) {
        // Chunk part kWarpChunks + 4 gi + q of the stream's slice: box 2 part + gi / 2 (kG even),
        // chunk 4 (gi % 2) + q of row 4 (8 nt + g) + stream, swizzled: xo, odd gi flipping bit 6.
        const int box = part * (Tr::kWarpChunks / 8) + gi / 2;
        uint4 b[kN];
#pragma unroll
        for (int n = 0; n < kN; ++n) {
          b[n] = *reinterpret_cast<const uint4*>(
              xs + box * Tr::kBoxBytes + 32 * (n0 + n) * Tr::kLineBytes + (xo ^ (64 * (gi % 2))));
        }
#pragma unroll
        for (int n = 0; n < kN; ++n) {
#pragma unroll
          for (int mt = 0; mt < Tr::kMTiles; ++mt) {
            MmaBf16(acc[n][mt], fa[gi][mt][0].x, fa[gi][mt][1].x, fa[gi][mt][0].y, fa[gi][mt][1].y,
                    b[n].x, b[n].y);
            MmaBf16(acc[n][mt], fa[gi][mt][0].z, fa[gi][mt][1].z, fa[gi][mt][0].w, fa[gi][mt][1].w,
                    b[n].z, b[n].w);
          }
          // sq on the tensor cores too: A = the tile's x as rows 0..7 (rows 8..15 zero) and B =
          // x^T in the same k map give D[g][n] = x_g . x_n, whose diagonal is sq. Two MMAs
          // replace 8 unpacks and 8 dependent FMAs; BF16 squares are exact in FP32.
          MmaBf16(sqa[n], b[n].x, 0u, b[n].y, 0u, b[n].x, b[n].y);
          MmaBf16(sqa[n], b[n].z, 0u, b[n].w, 0u, b[n].z, b[n].w);
        }
      }
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        const int nt = n0 + n;
        const int tok = 8 * nt + g;
        // D rows: m-tile 0 = hi 0..15, 1 = hi 16..23 | lo 0..7, 2 = lo 8..23; a lane holds
        // rows g and g + 8 of each, so hi_j and lo_j of j = g, 8 + g, 16 + g share a lane.
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          own[nt][3 * e] = acc[n][0][e] + acc[n][1][2 + e];
          own[nt][3 * e + 1] = acc[n][0][2 + e] + acc[n][2][e];
          own[nt][3 * e + 2] = acc[n][1][e] + acc[n][2][2 + e];
        }
        // Column 2q + 1 or 2q of row g (q = g / 2).
        const float sq = (g & 1) ? sqa[n][1] : sqa[n][0];
        own[nt][6] = sq;
#pragma unroll
        for (int j = 0; j < 3; ++j) {
          const int v = 8 * j + g, col = 8 * nt + 2 * q;
          *reinterpret_cast<float2*>(&wp[wp_index(v, col)]) =
              make_float2(own[nt][j], own[nt][3 + j]);
        }
        if (sq_lane) wp[wp_index(kLogits, tok)] = sq;
      }
    }
  };
  if constexpr (!kWithU) {
    // Split-K: one stage at a time, its MMAs, then its CTA sums to partials while the next stages
    // land. Thread (tok, vq) sums values 4 vq .. 4 vq + 3 of token tok over the warps' slots in
    // order (past sq: zeros) into one 16-byte store; a warp's 32 tokens read 32 distinct banks of
    // each slot.
    for (int s = 0; s < Tr::kStages; ++s) stage_x(s);
    for (int64_t s = 0; s < nstages; ++s) {
      // The coefficient kernel (a programmatic dependent) may be placed from the last stage on;
      // it waits for this grid's end before it reads the partials.
      if (s == nstages - 1) cudaTriggerProgrammaticLaunchCompletion();
      multiply(s);
      __syncthreads();  // wpart holds stage s; its X buffer is free
      stage_x(s + Tr::kStages);
      const int64_t t0 = (cluster + s * nclusters) * Tr::kStageTok;
      constexpr int kQuadsV = static_cast<int>(lay::kFwdRow / 4);
      if (tid < kQuadsV * Tr::kStageTok) {
        const int tok = tid % Tr::kStageTok, vq = tid / Tr::kStageTok;
        float o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int v = 4 * vq + e;
          float sum = 0.0f;
          if (v < Tr::kVals) {
            sum = wpart[wp_index(v, tok)];
#pragma unroll
            for (int w = 1; w < Tr::kWarps; ++w) {
              sum += wpart[w * Tr::kVals * Tr::kWStride + wp_index(v, tok)];
            }
          }
          o[e] = sum;
        }
        // Kept in L2 for the coefficient kernel, which drops them after reading.
        StGlobalF4Hint(partials + ((rank * part_tokens + t0 + tok) * lay::kFwdRow + 4 * vq),
                       make_float4(o[0], o[1], o[2], o[3]), CreateL2PolicyEvictLast());
      }
      __syncthreads();  // wpart is read
    }
    return;
  } else {
    // Block barrier of the warps that multiply and sum (the U warps run apart).
    auto sync = [&]() { NamedBarrierSync(1, Tr::kThreads); };
    // The CTA's partials of stage s: its warps' slots summed in order, into parity s % 2, 4 tokens
    // a thread (the swizzle moves whole 8-token groups); thread i0 of n sums items i0, i0 + n, ...
    auto cta_sum = [&](int64_t s, int i0, int n) {
      float* cp = cpart + (s & 1) * Tr::kCpartFloats;
      constexpr int kQuads = Tr::kStageTok / 4;
      for (int i = i0; i < Tr::kVals * kQuads; i += n) {
        const int v = i / kQuads, tok = 4 * (i % kQuads);
        const float* w0 = wpart + wp_index(v, tok);
        float4 sum = *reinterpret_cast<const float4*>(w0);
#pragma unroll
        for (int w = 1; w < Tr::kWarps; ++w) {
          const float4 p = *reinterpret_cast<const float4*>(w0 + w * Tr::kVals * Tr::kWStride);
          sum.x += p.x;
          sum.y += p.y;
          sum.z += p.z;
          sum.w += p.w;
        }
        *reinterpret_cast<float4*>(cp + Tr::CpIndex(v, tok)) = sum;
      }
    };
    // Software pipeline, one stage deep: the cluster barrier is split, and stage s + 1's MMAs run
    // between the arrive that publishes stage s's partials and the wait before the next CTA sum,
    // so neither the barrier's latency nor the slowest CTA's lag is paid in full every stage.
    // Phase k completes once every CTA's MMA warps have written stage k's partials (their arrive
    // k) and every CTA's U warps have summed stage k - 1's (theirs). Wait k therefore precedes
    // the writes of stage k + 1 into parity (k + 1) % 2 = (k - 1) % 2: two parities suffice.
    // X buffer s % kStages is refilled (by a U warp) once U of stage s is written.
    // This exchange, not either group's work, sets the stage (~2.9 us): without any MMA it takes
    // 2.7 us, without U 2.8. Remote mbarriers a cpart parity in place of the cluster barrier (no
    // group waiting for the other's slowest CTA) were 1% slower, and the U warps' remote loads 4
    // tokens wide 2.6% slower (H200, T = 16384; bench/results/mhc_h200.md, forty-first session).
    // Publishes this CTA's partials of the next stage (after a block barrier): one warp's release
    // covers the CTA's earlier shared writes, which the block barrier ordered before it, and the
    // other warps arrive without a fence. The last warp releases (warp 0 released until helper
    // mhc14, with its coefficient step behind the fence: prepare 0.289 ms at T = 16384, 0.267
    // with warp 7).
    auto arrive = [&]() {
      if (warp != Tr::kWarps - 1) {
        ClusterArriveRelaxed();
      } else {
        ClusterArrive();
      }
    };
    for (int s = 0; s < Tr::kStages; ++s) stage_x(s);
    if (nstages > 0) {
      multiply(0);
      sync();
      cta_sum(0, tid, Tr::kThreads);
    }
    sync();
    arrive();
    for (int64_t s = 0; s < nstages; ++s) {
      // As the split-K kernel's: the coefficient kernel's blocks may be placed (on the SMs no
      // cluster holds) from the last stage on; they wait for this grid's end before reading m.
      if (s == nstages - 1) cudaTriggerProgrammaticLaunchCompletion();
      const bool next = s + 1 < nstages;
      if (next) multiply(s + 1);
      sync();  // wpart holds stage s + 1
      // Wait s: every CTA's U warps have read stage s - 1's sums, whose parity stage s + 1 takes.
      ClusterWait();
      if (next) cta_sum(s + 1, tid, Tr::kThreads);
      sync();  // wpart free for stage s + 2
      arrive();
    }
    // No CTA may leave while another can still read its partials.
    ClusterWait();
  }
}

// The rest of the stats record from m = r z and r (floats 0..24, written by the cluster
// kernel): l = m scale + base, pre, post, Sinkhorn, zeros. pre is computed as the cluster kernel
// computes it for U, so U and stats agree bit for bit. m is read (or folded) 16 lanes a token,
// the Sinkhorn runs 2 lanes a token (SinkhornTwoLanes).
// 32 tokens a block (512 blocks at T = 16384, not 2048): as fast alone (H200, twenty-fourth
// session), and the blocks forward_stats places early (below) fit beside its CTAs in one round.
// 4 blocks an SM (32 registers; 34 without the bound, 3 blocks an SM, two rounds at T = 16384).
constexpr int kCoefThreads = 512;
constexpr int kCoefTokens = kCoefThreads / 16;

// The sum of row r of a row-major 4 x 4 block, in the order ((v0 + v1) + (v2 + v3)) of
// SinkhornForward.
__device__ __forceinline__ float RowSum(const float* P, int r) {
  return (P[4 * r] + P[4 * r + 1]) + (P[4 * r + 2] + P[4 * r + 3]);
}

// The Sinkhorn matrix of one token on a lane pair: lane h (= lane % 2) holds rows 2 h and 2 h + 1
// of the logits in P and returns the same rows of the matrix: softmax of each row plus hc_eps,
// then iters x (rows, then columns, each divided by its sum plus hc_eps; the first row step is
// the softmax's own). A row's sum is the lane's own; a column's is its two halves, (r0 + r1) on
// lane 0 and (r2 + r3) on lane 1, added by one shuffle: the order ((v0 + v1) + (v2 + v3)) of 16
// lanes a token's butterfly sums (FP32 addition commutes exactly), so the stats are the same bits
// as that layout's. It took forward_stats 0.1514 -> 0.1496 ms and forward_prepare (with its
// programmatic launch) 0.2215 -> 0.2181 ms at T = 16384, where 16 lanes paid two shuffles and a
// reciprocal a lane and half step, and one thread a token (32 tokens a warp) gained less at
// T = 16384 and lost 1.4% of forward_stats at 4096, one warp an SM then running the whole chain
// (H200, bench/results/mhc_h200.md, forty-third session, mhc106 / mhc107).
// __fdividef: the MUFU reciprocal and a multiply (within 2 ulp) instead of the IEEE division's
// refinement on the 2 iters dependent steps; 0.5-1.6% faster forward_stats / forward_prepare
// (H200, T = 4096 .. 12288); R within 1.2e-6 rel-L2 of the FP64 reference in the C = 4096 tests.
// Its divisors must lie in [2^-126, 2^126]: sums of positive entries plus hc_eps, between about
// 5 hc_eps and 5 (a divisor under 2^-126, which needs hc_eps that small, gives 0 or NaN). ptxas
// takes a divisor's reciprocal once for the lane's two or four divisions by it.
__device__ __forceinline__ void SinkhornTwoLanes(float (&P)[8], float hc_eps, int iters) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float mx = fmaxf(fmaxf(P[4 * r], P[4 * r + 1]), fmaxf(P[4 * r + 2], P[4 * r + 3]));
#pragma unroll
    for (int c = 0; c < 4; ++c) P[4 * r + c] = expf(P[4 * r + c] - mx);
    const float s = RowSum(P, r);
#pragma unroll
    for (int c = 0; c < 4; ++c) P[4 * r + c] = __fdividef(P[4 * r + c], s) + hc_eps;
  }
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float s = RowSum(P, r) + hc_eps;
#pragma unroll
        for (int c = 0; c < 4; ++c) P[4 * r + c] = __fdividef(P[4 * r + c], s);
      }
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const float half = P[c] + P[4 + c];
      const float s = (half + __shfl_xor_sync(0xffffffffu, half, 1)) + hc_eps;
      P[c] = __fdividef(P[c], s);
      P[4 + c] = __fdividef(P[4 + c], s);
    }
  }
}

// kFold (forward_stats' split-K path): m = r z and r are first made here from the 16 rank
// partials of the token (MhcFwdClusterKernel<.., false>), summed in rank order as the cluster sum
// of forward_prepare sums them (the same bits): lane e sums values e and e + 16 (sq at 24 on lane
// 8), so that every lane loads one or two floats of each rank's row.
template <typename Tr, bool kFold>
__global__ void __launch_bounds__(kCoefThreads, 4)
    MhcFwdCoefKernel(const float* __restrict__ scale, const float* __restrict__ base,
                     float* __restrict__ stats, int64_t T, float hc_eps, int iters,
                     const float* __restrict__ partials, int64_t part_tokens, float rms_eps,
                     bool discard) {
  const int e = threadIdx.x % 16;
  int64_t t = blockIdx.x * static_cast<int64_t>(kCoefTokens) + threadIdx.x / 16;
  const bool valid = t < T;
  t = valid ? t : T - 1;  // whole warps stay in the shuffles
  float* st = stats + t * kMhcStatsWidth;
  float m_e, m_8e;  // m_e (lanes 0..7) and m_{8 + e}
  if constexpr (kFold) {
    constexpr int kHi = Tr::kVals - 16;  // lanes with a second value (16 + e), sq's among them
    // A programmatic dependent of the split-K kernel: its partials are complete after this.
    cudaGridDependencySynchronize();
    const float* p = partials + t * lay::kFwdRow + e;
    const int64_t rank_stride = part_tokens * lay::kFwdRow;
    float z0 = __ldg(p), z1 = e < kHi ? __ldg(p + 16) : 0.0f;
#pragma unroll
    for (int r = 1; r < Tr::kCtas; ++r) {
      z0 += __ldg(p + r * rank_stride);
      if (e < kHi) z1 += __ldg(p + r * rank_stride + 16);
    }
    const float rinv = RmsInv(__shfl_sync(0xffffffffu, z1, kLogits - 16, 16), Tr::kC, rms_eps);
    const float m0 = rinv * z0, m1 = rinv * z1;
    if (valid) {
      st[e] = m0;
      if (e < kHi - 1) st[16 + e] = m1;
      if (e == kHi - 1) st[kLogits] = rinv;
    }
    m_e = m0;
    // The block's rows of every rank are dead now: 8 tokens x kFwdRow floats = 7 whole 128-byte
    // lines a rank (the block's first token is a multiple of 8), dropped without a write-back.
    static_assert(kCoefTokens * lay::kFwdRow * 4 % 128 == 0, "a block's rows are whole lines");
    constexpr int kLines = kCoefTokens * lay::kFwdRow * 4 / 128;
    static_assert(Tr::kCtas * kLines <= kCoefThreads, "a line a thread");
    if (discard) {
      __syncthreads();
      if (threadIdx.x < Tr::kCtas * kLines) {
        const int r = threadIdx.x / kLines, line = threadIdx.x % kLines;
        DiscardL2Line(
            reinterpret_cast<const unsigned char*>(
                partials + (r * part_tokens + blockIdx.x * int64_t{kCoefTokens}) * lay::kFwdRow) +
            128 * line);
      }
    }
    const float from_lo = __shfl_sync(0xffffffffu, m0, (e + 8) & 15, 16);
    const float from_hi = __shfl_sync(0xffffffffu, m1, (e + 8) & 15, 16);
    m_8e = e < 8 ? from_lo : from_hi;
  } else {
    // forward_prepare's: a programmatic dependent of the cluster kernel, which writes m.
    cudaGridDependencySynchronize();
    m_e = e < 8 ? st[e] : 0.0f;
    m_8e = st[8 + e];
  }
  // Lanes 0..7: pre (0..3) and post (4..7).
  if (e < 8 && valid) {
    const float l = fmaf(m_e, scale[Group(e)], base[e]);
    st[25 + e] = e < 4 ? Sigmoid(l) + hc_eps : 2.0f * Sigmoid(l);
  }
  // The block's logits go through shared memory to its first two warps, 2 lanes a token.
  __shared__ float tile[kCoefTokens][17];  // odd stride: fewer bank conflicts either way
  tile[threadIdx.x / 16][e] = fmaf(m_8e, scale[2], base[8 + e]);
  __syncthreads();
  if (threadIdx.x < 2 * kCoefTokens) {
    float* rows = &tile[threadIdx.x / 2][8 * (threadIdx.x & 1)];
    float P[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) P[i] = rows[i];
    SinkhornTwoLanes(P, hc_eps, iters);
#pragma unroll
    for (int i = 0; i < 8; ++i) rows[i] = P[i];
  }
  __syncthreads();
  if (valid) {
    st[33 + e] = tile[threadIdx.x / 16][e];
    if (e < kMhcStatsWidth - 49) st[49 + e] = 0.0f;
  }
}

// Enough CTAs to fill the device a few times over; a grid-stride loop does the rest. Fixed per
// shape, so the result never depends on it (each element is written by one thread).
int StreamGrid(int64_t T, int64_t C) {
  const int64_t work = T * (C / 8);
  const int64_t blocks = (work + kStreamThreads - 1) / kStreamThreads;
  return static_cast<int>(blocks < 132 * 16 ? blocks : 132 * 16);
}

// The forward workspace is checked on both paths, so that a call's validity does not depend on
// the device (the two-kernel path keeps fn's split there, forward_stats' split-K path its
// partials; forward_prepare's cluster path uses none of it).
Status CheckWorkspace(const char* name, int64_t C, const void* workspace, int64_t workspace_bytes,
                      int64_t T) {
  MHC_RETURN_IF_ERROR(CheckVec(name, workspace, "workspace"));
  const int64_t need = MhcForwardWorkspaceBytes(T, C);
  if (workspace_bytes < need) {
    return InvalidArgument(std::string(name) + ": workspace has " +
                           std::to_string(workspace_bytes) + " bytes, needs " +
                           std::to_string(need));
  }
  return OkStatus();
}

// The fn split of the forward workspace for the two-kernel path (the cluster kernel splits its
// fragments itself).
Status SplitFn(const char* name, const float* fn, int64_t C, void* workspace, cudaStream_t stream) {
  const int64_t K = 4 * C;
  const int64_t split_blocks = (kLogits * K / 4 + kSplitThreads - 1) / kSplitThreads;
  MhcFnSplitKernel<<<static_cast<unsigned>(split_blocks < kSplitMaxBlocks ? split_blocks
                                                                          : kSplitMaxBlocks),
                     kSplitThreads, 0, stream>>>(fn, static_cast<uint16_t*>(workspace), K);
  return LaunchStatus(name);
}

// The cluster path runs where fn's k-slices fit in registers (C a multiple of 1024 up to 4096;
// only C = 4096 is instantiated and tested) and the device can hold a 16-CTA cluster of them.
// Chosen by C and the device alone, the same for forward_stats and forward_prepare (their stats
// must be the same bits), for every T: from T = 16384 on the two-kernel path's 64-token stats
// kernel was the faster forward_stats, but the cluster path's forward_prepare gains more than
// forward_stats loses, and prepare runs every training step where stats only serves
// recomputation (H200, C = 4096, ms two-kernel / cluster: T = 16384 stats 0.192 / 0.206, prepare
// 0.356 / 0.309; T = 32768 stats 0.367 / 0.387, prepare 0.699 / 0.592; T = 65536 stats 0.717 /
// 0.754, prepare 1.383 / 1.158). The own-warp sums since took the cluster stats to 0.187 ms at
// T = 16384 (another run; T >= 32768 not re-measured).
// sq on the tensor cores, the lean sums and two n8 tiles a step took the cluster path from 0.239
// to 0.206 ms (stats) and 0.337 to 0.309 ms (prepare) at T = 16384, 0.077 to 0.068 and 0.103 to
// 0.095 at T = 4096 (each alone: sq 0.231 / 0.327, + lean 0.211 / 0.307, + 2 tiles 0.206 /
// 0.309 at T = 16384).
using ClusterTr = FwdClusterTraits<4>;
static_assert(lay::kFwdSliceC == ClusterTr::kC && lay::kFwdRanks == ClusterTr::kCtas &&
                  lay::kFwdVals == ClusterTr::kVals && lay::kFwdStageTok == ClusterTr::kStageTok &&
                  lay::kFwdRow % 4 == 0 && lay::kFwdRow >= lay::kFwdVals &&
                  lay::kFwdRow / 4 * ClusterTr::kStageTok <= ClusterTr::kThreads,
              "the workspace's split-K partials are the cluster kernel's CTA sums");

// forward_prepare's launch: clusters of kCtas CTAs with their U warps.
cudaLaunchConfig_t ClusterConfig(int clusters, cudaStream_t stream, cudaLaunchAttribute* attr) {
  using Tr = ClusterTr;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * Tr::kCtas));
  cfg.blockDim = dim3(Tr::kThreads + Tr::kUThreads);
  cfg.dynamicSmemBytes = Tr::kSmemBytes;
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = Tr::kCtas;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

Status PrepareClusterKernel(const char* name, int* max_clusters) {
  auto kernel = MhcFwdClusterKernel<ClusterTr, true>;
  MHC_RETURN_IF_ERROR(
      CudaStatus(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      ClusterTr::kSmemBytes),
                 name));
  MHC_RETURN_IF_ERROR(CudaStatus(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), name));
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = ClusterConfig(1, nullptr, &attr);
  return CudaStatus(cudaOccupancyMaxActiveClusters(max_clusters, kernel, &cfg), name);
}

// Resident 16-CTA clusters of the cluster kernel on the current device (0: the path is off, as
// it is for C other than 4096), asked once per device (the attributes the query sets are per
// device too, set before it).
PerDeviceMemo g_active_clusters;

Status ActiveClusters(const char* name, int64_t C, int* clusters) {
  *clusters = 0;
  if (C != ClusterTr::kC) return OkStatus();
  int device = 0;
  MHC_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), name));
  return g_active_clusters.Get(
      device, [name](int* n) { return PrepareClusterKernel(name, n); }, clusters);
}

unsigned CoefBlocks(int64_t T) {
  return static_cast<unsigned>((T + kCoefTokens - 1) / kCoefTokens);
}

// The coefficient kernel: a programmatic dependent of the split-K kernel (forward_stats) or of the
// cluster kernel (forward_prepare), which trigger its launch at each CTA's last stage (its blocks
// wait for the grid's end before they read the partials or m). The launch gap and the blocks'
// ramp then overlap that stage (H200, T = 16384 / 4096: forward_stats 0.1540 -> 0.1519 / 0.0526
// -> 0.0516 ms; forward_prepare 0.2215 -> 0.2204 / 0.0750 -> 0.0730, forty-third session's
// mhc107 pdl16). Triggered at the CTAs' start instead (twenty-third session's cand5), the waiting
// blocks cost 6% at T = 4096.
cudaLaunchConfig_t CoefDependentConfig(int64_t T, cudaStream_t stream, cudaLaunchAttribute* attr) {
  return ProgrammaticLaunchConfig(dim3(CoefBlocks(T)), dim3(kCoefThreads), 0, stream, attr);
}

// forward_stats' split-K kernel: as many CTAs as fit at once, in whole rank sets (its CTAs do not
// wait on each other, so this is a choice of speed only; the bits do not depend on it).
PerDeviceMemo g_split_k_groups;

Status SplitKGroups(const char* name, int* groups) {
  int device = 0;
  MHC_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), name));
  return g_split_k_groups.Get(
      device,
      [name, device](int* n) {
        auto kernel = MhcFwdClusterKernel<ClusterTr, false>;
        MHC_RETURN_IF_ERROR(
            CudaStatus(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            ClusterTr::kSmemBytes),
                       name));
        int per_sm = 0, sms = 0;
        MHC_RETURN_IF_ERROR(
            CudaStatus(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                           &per_sm, kernel, ClusterTr::kThreads, ClusterTr::kSmemBytes),
                       name));
        MHC_RETURN_IF_ERROR(
            CudaStatus(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), name));
        const int g = per_sm * sms / ClusterTr::kCtas;
        *n = g > 1 ? g : 1;
        return OkStatus();
      },
      groups);
}

Status ForwardCluster(const char* name, const uint16_t* X, const float* fn, const float* scale,
                      const float* base, float* stats, uint16_t* U, int64_t T, float rms_eps,
                      float hc_eps, int iters, int max_clusters, void* workspace,
                      cudaStream_t stream) {
  using Tr = ClusterTr;
  // The tensor copy's row coordinate (4 t) is 32-bit.
  if (T >= (int64_t{1} << 29)) {
    return InvalidArgument(std::string(name) + ": T must be < 2^29, got " + std::to_string(T));
  }
  CUtensorMap xmap;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(Tr::kC), static_cast<cuuint64_t>(4 * T)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(Tr::kC * 2)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(Tr::kBoxCh),
                             static_cast<cuuint32_t>(Tr::kBoxRows)};
  MHC_RETURN_IF_ERROR(EncodeTiledMap(&xmap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, X, dims, strides,
                                     box, CU_TENSOR_MAP_SWIZZLE_128B, name));
  const int64_t groups = (T + Tr::kStageTok - 1) / Tr::kStageTok;
  if (U == nullptr) {
    float* partials = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) +
                                               lay::ForwardFnSplitBytes(Tr::kC));
    const int64_t part_tokens = lay::FwdPartialsTokens(T);
    int max_groups = 0;
    MHC_RETURN_IF_ERROR(SplitKGroups(name, &max_groups));
    const int64_t g = groups < max_groups ? groups : max_groups;
    MhcFwdClusterKernel<ClusterTr, false>
        <<<static_cast<unsigned>(g * Tr::kCtas), Tr::kThreads, Tr::kSmemBytes, stream>>>(
            xmap, fn, scale, base, stats, nullptr, T, rms_eps, hc_eps, partials, part_tokens);
    MHC_RETURN_IF_ERROR(LaunchStatus(name));
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = CoefDependentConfig(T, stream, &attr);
    MHC_RETURN_IF_ERROR(
        CudaStatus(cudaLaunchKernelEx(&cfg, MhcFwdCoefKernel<ClusterTr, true>, scale, base,
                                      static_cast<float*>(stats), T, hc_eps, iters,
                                      static_cast<const float*>(partials), part_tokens, rms_eps,
                                      reinterpret_cast<uintptr_t>(partials) % 128 == 0),
                   name));
    return LaunchStatus(name);
  } else {
    const int clusters = static_cast<int>(groups < max_clusters ? groups : max_clusters);
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = ClusterConfig(clusters, stream, &attr);
    MHC_RETURN_IF_ERROR(CudaStatus(
        cudaLaunchKernelEx(&cfg, MhcFwdClusterKernel<ClusterTr, true>, xmap, fn, scale, base, stats,
                           U, T, rms_eps, hc_eps, static_cast<float*>(nullptr), int64_t{0}),
        name));
    MHC_RETURN_IF_ERROR(LaunchStatus(name));
  }
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = CoefDependentConfig(T, stream, &attr);
  MHC_RETURN_IF_ERROR(
      CudaStatus(cudaLaunchKernelEx(&cfg, MhcFwdCoefKernel<ClusterTr, false>, scale, base,
                                    static_cast<float*>(stats), T, hc_eps, iters,
                                    static_cast<const float*>(nullptr), int64_t{0}, rms_eps, false),
                 name));
  return LaunchStatus(name);
}

// The two-kernel path (stats kernel; forward_prepare adds the U kernel): every other C.
Status ForwardStats(const char* name, const uint16_t* X, const float* scale, const float* base,
                    float* stats, int64_t T, int64_t C, float rms_eps, float hc_eps, int iters,
                    const void* workspace, cudaStream_t stream) {
  const uint16_t* fn_split = static_cast<const uint16_t*>(workspace);
  auto launch = [&](auto kernel, auto traits) -> Status {
    using Tr = decltype(traits);
    // Above the 48 KiB default; set on every call since the attribute is per device.
    MHC_RETURN_IF_ERROR(CudaStatus(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes),
        name));
    const int64_t blocks = (T + Tr::kTokensPerCta - 1) / Tr::kTokensPerCta;
    kernel<<<static_cast<unsigned>(blocks), Tr::kThreads, Tr::kSmemBytes, stream>>>(
        X, fn_split, scale, base, stats, T, C, rms_eps, hc_eps, iters);
    return LaunchStatus(name);
  };
  // The variant is a function of T only (and both give the same bits).
  if (T >= kLongT) return launch(MhcFwdStatsKernel<2>, FwdStatsTraits<2>{});
  return launch(MhcFwdStatsKernel<1>, FwdStatsTraits<1>{});
}

Status CheckForwardArgs(const char* name, const uint16_t* X, const float* fn, const float* scale,
                        const float* base, const float* stats, int64_t T, int64_t C, int iters) {
  MHC_RETURN_IF_ERROR(CheckShapeAndIters(name, T, C, iters));
  if (T == 0) return OkStatus();
  MHC_RETURN_IF_ERROR(CheckVec(name, X, "X"));
  MHC_RETURN_IF_ERROR(CheckVec(name, fn, "fn"));
  MHC_RETURN_IF_ERROR(CheckVec(name, stats, "stats"));
  if (scale == nullptr || base == nullptr) {
    return InvalidArgument(std::string(name) + ": scale and base are required");
  }
  return OkStatus();
}

}  // namespace
}  // namespace mhc_cuda

namespace mhc_cuda {
namespace {

// forward_stats (with_u false, U unused) and forward_prepare: one path choice for both, so that
// their stats are the same bits.
Status Forward(const char* name, const uint16_t* X, const float* fn, const float* scale,
               const float* base, float* stats, bool with_u, uint16_t* U, int64_t T, int64_t C,
               float rms_eps, float hc_eps, int iters, void* workspace, int64_t workspace_bytes,
               cudaStream_t stream) {
  MHC_RETURN_IF_ERROR(CheckForwardArgs(name, X, fn, scale, base, stats, T, C, iters));
  if (T == 0) return OkStatus();
  if (with_u) {
    MHC_RETURN_IF_ERROR(CheckVec(name, U, "U"));
  } else {
    U = nullptr;
  }
  MHC_RETURN_IF_ERROR(CheckWorkspace(name, C, workspace, workspace_bytes, T));
  int clusters = 0;
  MHC_RETURN_IF_ERROR(ActiveClusters(name, C, &clusters));
  if (clusters > 0) {
    return ForwardCluster(name, X, fn, scale, base, stats, U, T, rms_eps, hc_eps, iters, clusters,
                          workspace, stream);
  }
  MHC_RETURN_IF_ERROR(SplitFn(name, fn, C, workspace, stream));
  MHC_RETURN_IF_ERROR(
      ForwardStats(name, X, scale, base, stats, T, C, rms_eps, hc_eps, iters, workspace, stream));
  if (U == nullptr) return OkStatus();
  MhcFwdUKernel<<<StreamGrid(T, C), kStreamThreads, 0, stream>>>(X, stats, U, T, C);
  return LaunchStatus(name);
}

}  // namespace
}  // namespace mhc_cuda

Status MhcForwardStatsCuda(const MhcFwdStatsParams& p, cudaStream_t stream) {
  return mhc_cuda::Forward("mhc_forward_stats", p.X, p.fn, p.scale, p.base, p.stats, false, nullptr,
                           p.T, p.C, p.rms_eps, p.hc_eps, p.sinkhorn_iters, p.workspace,
                           p.workspace_bytes, stream);
}

Status MhcForwardPrepareCuda(const MhcFwdPrepareParams& p, cudaStream_t stream) {
  return mhc_cuda::Forward("mhc_forward_prepare", p.X, p.fn, p.scale, p.base, p.stats, true, p.U,
                           p.T, p.C, p.rms_eps, p.hc_eps, p.sinkhorn_iters, p.workspace,
                           p.workspace_bytes, stream);
}

Status MhcForwardFinishCuda(const MhcFwdFinishParams& p, cudaStream_t stream) {
  const char* name = "mhc_forward_finish";
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckShapeAndIters(name, p.T, p.C, 1));
  if (p.T == 0) return OkStatus();
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.X, "X"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.B, "B"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.stats, "stats"));
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.Y, "Y"));
  mhc_cuda::
      MhcFwdFinishKernel<<<mhc_cuda::StreamGrid(p.T, p.C), mhc_cuda::kStreamThreads, 0, stream>>>(
          p.X, p.B, p.stats, p.Y, p.T, p.C);
  return mhc_cuda::LaunchStatus(name);
}

}  // namespace cakegrad::kernels
