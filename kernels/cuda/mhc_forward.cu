// mHC forward on sm_90a: forward_stats (z = fn x on the tensor cores, then the per-token
// coefficients), forward_prepare (stats, then U) and forward_finish (Y).
//
// z_j = sum_i fn[j, i] x_i is a [T, 4C] x [4C, 24] product: 2 * 24 * 4C FLOPs a token, as many
// as the bytes of X are read, so FP32 FMAs would make it compute-bound. It runs on the BF16
// tensor cores instead: x is BF16 already, and fn is split as fn = hi + lo (two BF16 values,
// 16 significant bits, |fn - hi - lo| <= 2^-18 |fn|) so the 48 rows [hi; lo] times x, summed in
// FP32, give z to about FP32 accuracy. The split is done once per call (MhcFnSplitKernel, into
// the forward workspace) and the stats kernel stages it with cp.async, one chunk ahead.
#include "cakegrad/kernels/mhc.h"
#include "mhc_common.cuh"

namespace cakegrad::kernels {
namespace mhc_cuda {
namespace {

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
      hi[e] = __bfloat162float(__float2bfloat16_rn(vs[e]));
      lo[e] = vs[e] - hi[e];
    }
    const int64_t row = 4 * k / K, col = 4 * k % K;
    *reinterpret_cast<uint2*>(fn_split + row * K + col) =
        make_uint2(PackBf16(hi[0], hi[1]), PackBf16(hi[2], hi[3]));
    *reinterpret_cast<uint2*>(fn_split + (kLogits + row) * K + col) =
        make_uint2(PackBf16(lo[0], lo[1]), PackBf16(lo[2], lo[3]));
  }
}

// Per-token coefficients from z and sq, written as the 64-float stats record.
__device__ void WriteStats(const float* z, float sq, int64_t C, const float* scale,
                           const float* base, float rms_eps, float hc_eps, int iters,
                           float* stats) {
  const float r = 1.0f / sqrtf(sq / static_cast<float>(4 * C) + rms_eps);
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
      CpAsync16Zfill(dst + row * Tr::kRowStride + col, fn_split + row * K + kc + col, true);
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

// Enough CTAs to fill the device a few times over; a grid-stride loop does the rest. Fixed per
// shape, so the result never depends on it (each element is written by one thread).
int StreamGrid(int64_t T, int64_t C) {
  const int64_t work = T * (C / 8);
  const int64_t blocks = (work + kStreamThreads - 1) / kStreamThreads;
  return static_cast<int>(blocks < 132 * 16 ? blocks : 132 * 16);
}

Status ForwardStats(const char* name, const uint16_t* X, const float* fn, const float* scale,
                    const float* base, float* stats, int64_t T, int64_t C, float rms_eps,
                    float hc_eps, int iters, void* workspace, int64_t workspace_bytes,
                    cudaStream_t stream) {
  MHC_RETURN_IF_ERROR(CheckVec(name, workspace, "workspace"));
  const int64_t need = MhcForwardWorkspaceBytes(T, C);
  if (workspace_bytes < need) {
    return InvalidArgument(std::string(name) + ": workspace has " +
                           std::to_string(workspace_bytes) + " bytes, needs " +
                           std::to_string(need));
  }
  uint16_t* fn_split = static_cast<uint16_t*>(workspace);
  const int64_t K = 4 * C;
  const int64_t split_blocks = (kLogits * K / 4 + kSplitThreads - 1) / kSplitThreads;
  MhcFnSplitKernel<<<static_cast<unsigned>(split_blocks < kSplitMaxBlocks ? split_blocks
                                                                          : kSplitMaxBlocks),
                     kSplitThreads, 0, stream>>>(fn, fn_split, K);
  MHC_RETURN_IF_ERROR(LaunchStatus(name));
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

Status MhcForwardStatsCuda(const MhcFwdStatsParams& p, cudaStream_t stream) {
  const char* name = "mhc_forward_stats";
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckForwardArgs(name, p.X, p.fn, p.scale, p.base, p.stats, p.T,
                                                 p.C, p.sinkhorn_iters));
  if (p.T == 0) return OkStatus();
  return mhc_cuda::ForwardStats(name, p.X, p.fn, p.scale, p.base, p.stats, p.T, p.C, p.rms_eps,
                                p.hc_eps, p.sinkhorn_iters, p.workspace, p.workspace_bytes, stream);
}

Status MhcForwardPrepareCuda(const MhcFwdPrepareParams& p, cudaStream_t stream) {
  const char* name = "mhc_forward_prepare";
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckForwardArgs(name, p.X, p.fn, p.scale, p.base, p.stats, p.T,
                                                 p.C, p.sinkhorn_iters));
  if (p.T == 0) return OkStatus();
  MHC_RETURN_IF_ERROR(mhc_cuda::CheckVec(name, p.U, "U"));
  MHC_RETURN_IF_ERROR(mhc_cuda::ForwardStats(name, p.X, p.fn, p.scale, p.base, p.stats, p.T, p.C,
                                             p.rms_eps, p.hc_eps, p.sinkhorn_iters, p.workspace,
                                             p.workspace_bytes, stream));
  mhc_cuda::MhcFwdUKernel<<<mhc_cuda::StreamGrid(p.T, p.C), mhc_cuda::kStreamThreads, 0, stream>>>(
      p.X, p.stats, p.U, p.T, p.C);
  return mhc_cuda::LaunchStatus(name);
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
