// The sequential KDA backward's first launch (kda_backward.cu): the exact recurrence in FP64,
// split over the 128 state rows, saving the state every kda_layout::kCheckpointInterval tokens of
// each document and every token's residual w = v - S_decayed kh, from which the backward rebuilds
// its states. FP64 for the reason in kda_common.cuh (ComputeToken64).
//
// Each row v of the state evolves on its own given the token's kh, decay and beta, so a CTA owns
// kRowsPerCta rows of one (document, head) and keeps them in registers for the whole document:
// kLanesPerRow lanes share a row, 16 columns each. Per token the delta rule's row sum S_d kh
// (S_d = the decayed state) is one 3-level shuffle reduction.
//
// The CTA is warp-specialized: kComputeWarps run the recurrence on token batch b while
// kPrepWarps compute batch b+1's vectors (L2 norms, gate, beta) into the other shared-memory
// buffer and already have batch b+2's raw loads in flight; one barrier per batch.
#include <atomic>

#include "kda_common.cuh"

namespace cakegrad::kernels {
namespace kda_cuda {
namespace {

struct RecTraits {
  static constexpr int kComputeWarps = 4;
  static constexpr int kPrepWarps = 4;
  static constexpr int kThreads = 32 * (kComputeWarps + kPrepWarps);
  static constexpr int kLanesPerRow = 8;
  static constexpr int kRowsPerWarp = 32 / kLanesPerRow;
  static constexpr int kRowsPerCta = kComputeWarps * kRowsPerWarp;
  static constexpr int kCtasPerHead = kDim / kRowsPerCta;
  static constexpr int kPairsPerLane = kDim / 2 / kLanesPerRow;  // double2 columns per lane
  static constexpr int kTokenBatch = 8;
  static constexpr int kTokensPerPrepWarp = kTokenBatch / kPrepWarps;
  static_assert(kDim % kRowsPerCta == 0, "rows must split evenly over CTAs");
  static_assert(kDim % (2 * kLanesPerRow) == 0, "columns must split into double2 per lane");
  static_assert(kLanesPerRow == 8, "the row reduction below is 3 xor levels");
  static_assert(kda_layout::kCheckpointInterval % kTokenBatch == 0,
                "checkpoints are taken at token-batch starts");
  static_assert(kTokenBatch % kPrepWarps == 0, "whole tokens per prep warp");
  static_assert(kTokenBatch * kRowsPerCta == 32 * kPrepWarps, "one v element per prep thread");
};

struct RecBatch {
  double kh[RecTraits::kTokenBatch][kDim];
  double d[RecTraits::kTokenBatch][kDim];
  double bt[RecTraits::kTokenBatch];
  float v[RecTraits::kTokenBatch][RecTraits::kRowsPerCta];
};

// Raw inputs of one batch held by one prep thread.
struct PrepRegs {
  RawToken tok[RecTraits::kTokensPerPrepWarp];
  float v;
};

__device__ __forceinline__ void LoadBatch(const RecomputeArgs& a, int64_t t0, int nb, int pw,
                                          int slice, int64_t h, PrepRegs* r) {
  using Tr = RecTraits;
  const int64_t H = a.s.H;
#pragma unroll
  for (int i = 0; i < Tr::kTokensPerPrepWarp; ++i) {
    const int tb = pw + Tr::kPrepWarps * i;
    if (tb < nb) r->tok[i] = LoadToken(a.q, a.k, a.g, a.beta, t0 + tb, H, h);
  }
  const int pt = pw * 32 + (threadIdx.x & 31);
  const int tb = pt / Tr::kRowsPerCta;
  r->v =
      tb < nb
          ? Bf16(a.v[((t0 + tb) * H + h) * kDim + slice * Tr::kRowsPerCta + pt % Tr::kRowsPerCta])
          : 0.f;
}

__device__ __forceinline__ void ComputeBatch(const PrepRegs& r, int nb, int pw, float4 dtb,
                                             double exp_a, double lower_bound, RecBatch& b) {
  using Tr = RecTraits;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < Tr::kTokensPerPrepWarp; ++i) {
    const int tb = pw + Tr::kPrepWarps * i;
    if (tb < nb) {
      const TokenScalars64 ts =
          ComputeToken64(r.tok[i], dtb, exp_a, lower_bound, b.kh[tb], nullptr, b.d[tb]);
      if (lane == 0) b.bt[tb] = ts.bt;
    }
  }
  const int pt = pw * 32 + lane;
  b.v[pt / Tr::kRowsPerCta][pt % Tr::kRowsPerCta] = r.v;
}

__global__ void __launch_bounds__(RecTraits::kThreads)
    KdaRecomputeKernel(const __grid_constant__ RecomputeArgs a) {
  using Tr = RecTraits;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  RecBatch* sm = reinterpret_cast<RecBatch*>(smem_raw);  // two buffers
  const int slice = blockIdx.x;
  const int64_t h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int64_t H = a.s.H;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const bool compute = warp < Tr::kComputeWarps;

  int64_t bos, eos;
  DocBounds(a.s, n, &bos, &eos);
  const int64_t batches = (eos - bos + Tr::kTokenBatch - 1) / Tr::kTokenBatch;
  auto batch_len = [&](int64_t b) {
    return static_cast<int>(min(int64_t{Tr::kTokenBatch}, eos - bos - b * Tr::kTokenBatch));
  };

  // Compute warps: rows and state. Lane col owns the double2 columns col + kLanesPerRow * i.
  const int rloc = (warp % Tr::kComputeWarps) * Tr::kRowsPerWarp + lane / Tr::kLanesPerRow;
  const int row = slice * Tr::kRowsPerCta + rloc;
  const int col = lane % Tr::kLanesPerRow;
  const int64_t state_off = (n * H + h) * kDimSq + int64_t(row) * kDim;
  double S[Tr::kPairsPerLane][2];
  // Prep warps: raw inputs of the batch after next.
  const int pw = warp - Tr::kComputeWarps;
  const double exp_a = exp(static_cast<double>(a.A_log[h]));
  PrepRegs regs{};
  float4 dtb = make_float4(0.f, 0.f, 0.f, 0.f);

  if (compute) {
#pragma unroll
    for (int i = 0; i < Tr::kPairsPerLane; ++i) {
      float2 x = make_float2(0.f, 0.f);
      if (a.initial_state != nullptr) {
        x = reinterpret_cast<const float2*>(a.initial_state +
                                            state_off)[col + Tr::kLanesPerRow * i];
      }
      S[i][0] = x.x;
      S[i][1] = x.y;
    }
  } else {
    dtb = reinterpret_cast<const float4*>(a.dt_bias + h * kDim)[lane];
    if (batches > 0) {
      LoadBatch(a, bos, batch_len(0), pw, slice, h, &regs);
      ComputeBatch(regs, batch_len(0), pw, dtb, exp_a, a.s.lower_bound, sm[0]);
    }
    if (batches > 1) LoadBatch(a, bos + Tr::kTokenBatch, batch_len(1), pw, slice, h, &regs);
  }
  __syncthreads();

  for (int64_t b = 0; b < batches; ++b) {
    const int64_t t0 = bos + b * Tr::kTokenBatch;
    if (compute) {
      const RecBatch& cur = sm[b & 1];
      if ((t0 - bos) % kda_layout::kCheckpointInterval == 0) {
        const int64_t slot = bos / kda_layout::kCheckpointInterval + n +
                             (t0 - bos) / kda_layout::kCheckpointInterval;
        double2* dst = reinterpret_cast<double2*>(a.checkpoints + (slot * H + h) * kDimSq +
                                                  int64_t(row) * kDim);
#pragma unroll
        for (int i = 0; i < Tr::kPairsPerLane; ++i) {
          dst[col + Tr::kLanesPerRow * i] = make_double2(S[i][0], S[i][1]);
        }
      }
      const int nb = batch_len(b);
      for (int tb = 0; tb < nb; ++tb) {
        double2 dv[Tr::kPairsPerLane], kv[Tr::kPairsPerLane];
#pragma unroll
        for (int i = 0; i < Tr::kPairsPerLane; ++i) {
          dv[i] = reinterpret_cast<const double2*>(cur.d[tb])[col + Tr::kLanesPerRow * i];
          kv[i] = reinterpret_cast<const double2*>(cur.kh[tb])[col + Tr::kLanesPerRow * i];
        }
        // Four partial sums: the token's dependent chain is this row sum, then the shuffles.
        double p[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
        for (int i = 0; i < Tr::kPairsPerLane; ++i) {
          S[i][0] = __dmul_rn(S[i][0], dv[i].x);
          S[i][1] = __dmul_rn(S[i][1], dv[i].y);
          p[2 * (i & 1)] = fma(S[i][0], kv[i].x, p[2 * (i & 1)]);
          p[2 * (i & 1) + 1] = fma(S[i][1], kv[i].y, p[2 * (i & 1) + 1]);
        }
        double pred = (p[0] + p[1]) + (p[2] + p[3]);
#pragma unroll
        for (int m = 4; m > 0; m >>= 1) pred += __shfl_xor_sync(0xffffffffu, pred, m);
        const double w = static_cast<double>(cur.v[tb][rloc]) - pred;
        const double u = __dmul_rn(cur.bt[tb], w);
#pragma unroll
        for (int i = 0; i < Tr::kPairsPerLane; ++i) {
          S[i][0] = __fma_rn(u, kv[i].x, S[i][0]);
          S[i][1] = __fma_rn(u, kv[i].y, S[i][1]);
        }
        if (col == 0) a.residual[((t0 + tb) * H + h) * kDim + row] = w;
      }
    } else if (b + 1 < batches) {
      ComputeBatch(regs, batch_len(b + 1), pw, dtb, exp_a, a.s.lower_bound, sm[(b + 1) & 1]);
      if (b + 2 < batches) {
        LoadBatch(a, t0 + 2 * Tr::kTokenBatch, batch_len(b + 2), pw, slice, h, &regs);
      }
    }
    __syncthreads();
  }
}

}  // namespace

Status LaunchRecomputePass(const RecomputeArgs& a, cudaStream_t stream) {
  if (a.s.N == 0) return OkStatus();
  constexpr int kSmem = static_cast<int>(2 * sizeof(RecBatch));
  static std::atomic<uint64_t> done{0};
  const Status attr = AllowSmem(KdaRecomputeKernel, kSmem, &done, "the recompute pass");
  if (!attr.ok()) return attr;
  const dim3 grid(RecTraits::kCtasPerHead, static_cast<unsigned>(a.s.H),
                  static_cast<unsigned>(a.s.N));
  KdaRecomputeKernel<<<grid, RecTraits::kThreads, kSmem, stream>>>(a);
  return CheckLaunch("the recompute pass");
}

}  // namespace kda_cuda
}  // namespace cakegrad::kernels
