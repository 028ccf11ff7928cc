// KDA forward: the exact sequential recurrence, split over the 128 state rows.
//
// Each row v of the state evolves on its own given the token's kh, qh, decay and beta, so a CTA
// owns kRowsPerCta rows of one (document, head) and keeps them in registers for the whole
// document: kLanesPerRow lanes share a row, 16 columns each. Per token, both row sums (S_d kh
// for the delta rule and S_d qh for the output, S_d = decayed state) come from the decayed state
// before the rank-1 update, using o = S_t qh = S_d qh + u (kh . qh); so one interleaved 3-level
// shuffle reduction is all the token's critical path holds.
//
// The CTA is warp-specialized: kComputeWarps run the recurrence on token batch b while
// kPrepWarps compute batch b+1's vectors (L2 norms, gate, beta) into the other shared-memory
// buffer and already have batch b+2's raw loads in flight; one barrier per batch.
#include "kda_chunked_forward.cuh"
#include "kda_common.cuh"

namespace cakegrad::kernels {
namespace kda_cuda {
namespace {

struct FwdTraits {
  static constexpr int kComputeWarps = 4;
  static constexpr int kPrepWarps = 4;
  static constexpr int kThreads = 32 * (kComputeWarps + kPrepWarps);
  static constexpr int kLanesPerRow = 8;
  static constexpr int kRowsPerWarp = 32 / kLanesPerRow;
  static constexpr int kRowsPerCta = kComputeWarps * kRowsPerWarp;
  static constexpr int kCtasPerHead = kDim / kRowsPerCta;
  static constexpr int kVec4PerLane = kDim / 4 / kLanesPerRow;  // float4 columns per lane
  static constexpr int kTokenBatch = 8;
  static constexpr int kTokensPerPrepWarp = kTokenBatch / kPrepWarps;
  static_assert(kDim % kRowsPerCta == 0, "rows must split evenly over CTAs");
  static_assert(kDim % (4 * kLanesPerRow) == 0, "columns must split into float4 per lane");
  static_assert(kLanesPerRow == 8, "the row reductions below are 3 xor levels");
  static_assert(kVec4PerLane == 4, "four accumulators, one per float4 component");
  static_assert(kda_layout::kCheckpointInterval % kTokenBatch == 0,
                "checkpoints are taken at token-batch starts");
  static_assert(kTokenBatch % kPrepWarps == 0, "whole tokens per prep warp");
  static_assert(kTokenBatch * kRowsPerCta == 32 * kPrepWarps, "one v element per prep thread");
};

struct FwdBatch {
  float kh[FwdTraits::kTokenBatch][kDim];
  float qh[FwdTraits::kTokenBatch][kDim];
  float d[FwdTraits::kTokenBatch][kDim];
  float bt[FwdTraits::kTokenBatch];
  float qk[FwdTraits::kTokenBatch];
  float v[FwdTraits::kTokenBatch][FwdTraits::kRowsPerCta];
};

// Raw inputs of one batch held by one prep thread.
struct PrepRegs {
  RawToken tok[FwdTraits::kTokensPerPrepWarp];
  float v;
};

__device__ __forceinline__ void LoadBatch(const FwdArgs& a, int64_t t0, int nb, int pw, int slice,
                                          int64_t h, PrepRegs* r) {
  using Tr = FwdTraits;
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
                                             float exp_a, float lower_bound, FwdBatch& b) {
  using Tr = FwdTraits;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < Tr::kTokensPerPrepWarp; ++i) {
    const int tb = pw + Tr::kPrepWarps * i;
    if (tb < nb) {
      const TokenScalars ts =
          ComputeToken(r.tok[i], dtb, exp_a, lower_bound, b.kh[tb], b.qh[tb], b.d[tb]);
      if (lane == 0) {
        b.bt[tb] = ts.bt;
        b.qk[tb] = ts.qk;
      }
    }
  }
  const int pt = pw * 32 + lane;
  b.v[pt / Tr::kRowsPerCta][pt % Tr::kRowsPerCta] = r.v;
}

template <bool kRecompute>
__global__ void __launch_bounds__(FwdTraits::kThreads)
    KdaForwardKernel(const __grid_constant__ FwdArgs a) {
  using Tr = FwdTraits;
  __shared__ __align__(16) FwdBatch sm[2];
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

  // Compute warps: rows and state.
  const int rloc = (warp % Tr::kComputeWarps) * Tr::kRowsPerWarp + lane / Tr::kLanesPerRow;
  const int row = slice * Tr::kRowsPerCta + rloc;
  const int col = lane % Tr::kLanesPerRow;  // float4 columns col + kLanesPerRow * i
  const int64_t state_off = (n * H + h) * kDimSq + int64_t(row) * kDim;
  float S[Tr::kVec4PerLane][4];
  // Prep warps: raw inputs of the batch after next.
  const int pw = warp - Tr::kComputeWarps;
  const float exp_a = expf(a.A_log[h]);
  PrepRegs regs{};
  float4 dtb = make_float4(0.f, 0.f, 0.f, 0.f);

  if (compute) {
#pragma unroll
    for (int i = 0; i < Tr::kVec4PerLane; ++i) {
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (a.initial_state != nullptr) {
        x = reinterpret_cast<const float4*>(a.initial_state +
                                            state_off)[col + Tr::kLanesPerRow * i];
      }
      S[i][0] = x.x;
      S[i][1] = x.y;
      S[i][2] = x.z;
      S[i][3] = x.w;
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
      const FwdBatch& cur = sm[b & 1];
      if (kRecompute && (t0 - bos) % kda_layout::kCheckpointInterval == 0) {
        const int64_t slot = bos / kda_layout::kCheckpointInterval + n +
                             (t0 - bos) / kda_layout::kCheckpointInterval;
        float4* dst = reinterpret_cast<float4*>(a.checkpoints + (slot * H + h) * kDimSq +
                                                int64_t(row) * kDim);
#pragma unroll
        for (int i = 0; i < Tr::kVec4PerLane; ++i) {
          dst[col + Tr::kLanesPerRow * i] = make_float4(S[i][0], S[i][1], S[i][2], S[i][3]);
        }
      }
      const int nb = batch_len(b);
      for (int tb = 0; tb < nb; ++tb) {
        float4 dv[Tr::kVec4PerLane], kv[Tr::kVec4PerLane], qv[Tr::kVec4PerLane];
#pragma unroll
        for (int i = 0; i < Tr::kVec4PerLane; ++i) {
          dv[i] = reinterpret_cast<const float4*>(cur.d[tb])[col + Tr::kLanesPerRow * i];
          kv[i] = reinterpret_cast<const float4*>(cur.kh[tb])[col + Tr::kLanesPerRow * i];
          qv[i] = reinterpret_cast<const float4*>(cur.qh[tb])[col + Tr::kLanesPerRow * i];
        }
        float p[4] = {0.f, 0.f, 0.f, 0.f}, o[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int i = 0; i < Tr::kVec4PerLane; ++i) {
          const float* dd = &dv[i].x;
          const float* kk = &kv[i].x;
          const float* qq = &qv[i].x;
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            S[i][c] = __fmul_rn(S[i][c], dd[c]);
            p[c] = fmaf(S[i][c], kk[c], p[c]);
            o[c] = fmaf(S[i][c], qq[c], o[c]);
          }
        }
        float pred = (p[0] + p[1]) + (p[2] + p[3]);
        float op = (o[0] + o[1]) + (o[2] + o[3]);
#pragma unroll
        for (int m = 4; m > 0; m >>= 1) {
          pred += __shfl_xor_sync(0xffffffffu, pred, m);
          op += __shfl_xor_sync(0xffffffffu, op, m);
        }
        const float w = cur.v[tb][rloc] - pred;
        const float u = __fmul_rn(cur.bt[tb], w);
#pragma unroll
        for (int i = 0; i < Tr::kVec4PerLane; ++i) {
          const float* kk = &kv[i].x;
#pragma unroll
          for (int c = 0; c < 4; ++c) S[i][c] = __fmaf_rn(u, kk[c], S[i][c]);
        }
        const int64_t out = ((t0 + tb) * H + h) * kDim + row;
        if (col == 0) {
          if constexpr (kRecompute) {
            a.residual[out] = w;
          } else {
            a.o[out] = ToBf16(a.s.scale * fmaf(u, cur.qk[tb], op));
          }
        }
      }
    } else if (b + 1 < batches) {
      ComputeBatch(regs, batch_len(b + 1), pw, dtb, exp_a, a.s.lower_bound, sm[(b + 1) & 1]);
      if (b + 2 < batches) {
        LoadBatch(a, t0 + 2 * Tr::kTokenBatch, batch_len(b + 2), pw, slice, h, &regs);
      }
    }
    __syncthreads();
  }

  if (!kRecompute && compute && a.final_state != nullptr) {
    float4* dst = reinterpret_cast<float4*>(a.final_state + state_off);
#pragma unroll
    for (int i = 0; i < Tr::kVec4PerLane; ++i) {
      dst[col + Tr::kLanesPerRow * i] = make_float4(S[i][0], S[i][1], S[i][2], S[i][3]);
    }
  }
}

}  // namespace

Status LaunchForwardPass(const FwdArgs& a, bool recompute, cudaStream_t stream) {
  if (a.s.N == 0) return OkStatus();
  const dim3 grid(FwdTraits::kCtasPerHead, static_cast<unsigned>(a.s.H),
                  static_cast<unsigned>(a.s.N));
  if (recompute) {
    KdaForwardKernel<true><<<grid, FwdTraits::kThreads, 0, stream>>>(a);
  } else {
    KdaForwardKernel<false><<<grid, FwdTraits::kThreads, 0, stream>>>(a);
  }
  return CheckLaunch(recompute ? "the forward recompute" : "the forward");
}

}  // namespace kda_cuda

Status KdaForwardCuda(const KdaFwdParams& p, cudaStream_t stream) {
  kda_cuda::FwdArgs a{};
  Status st = kda_cuda::MakeShape(p.B, p.T, p.H, p.num_docs, p.cu_seqlens, p.seqlens_dtype, p.scale,
                                  p.lower_bound, p.device_status, &a.s);
  if (!st.ok()) return st;
  if (a.s.total_tokens > 0 && (p.q == nullptr || p.k == nullptr || p.v == nullptr ||
                               p.g == nullptr || p.beta == nullptr || p.o == nullptr)) {
    return InvalidArgument("kda: q, k, v, g, beta and o are required");
  }
  if (p.A_log == nullptr || p.dt_bias == nullptr) {
    return InvalidArgument("kda: A_log and dt_bias are required");
  }
  const Status aligned = kda_cuda::CheckAligned16({{"q", p.q},
                                                   {"k", p.k},
                                                   {"v", p.v},
                                                   {"g", p.g},
                                                   {"o", p.o},
                                                   {"dt_bias", p.dt_bias},
                                                   {"initial_state", p.initial_state},
                                                   {"final_state", p.final_state},
                                                   {"workspace", p.workspace}});
  if (!aligned.ok()) return aligned;
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.g = p.g;
  a.beta = p.beta;
  a.A_log = p.A_log;
  a.dt_bias = p.dt_bias;
  a.initial_state = p.initial_state;
  a.o = p.o;
  a.final_state = p.final_state;
  return kda_cuda::LaunchChunkedForward(a, p.workspace, p.workspace_bytes, stream);
}

}  // namespace cakegrad::kernels
