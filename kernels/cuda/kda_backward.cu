// KDA backward: the adjoint recurrence, split over the 128 state rows by a cluster of CTAs, in
// FP64 (why: kda_common.cuh, TokenScalars64). The chunked backward (kda_chunked_backward.cu) is
// the fast one; this is the default below 4 heads, where one head's dA_log is a badly conditioned
// sum.
//
// Documents are cut into segments (kda_layout::SegmentLength) that run in parallel. In order on
// the caller's stream:
//  0. the token pass (kda_row_pass.cu): every token's FP64 decays and scalars, once;
//  1. the segment transitions (kda_row_pass.cu), then FP64 scans (kda_segment.cu) that give each
//     segment's start state and the state gradient at its end;
//  2. the recompute pass (kda_row_pass.cu), per segment from its start state, saves the state at
//     every kCheckpointInterval-th token and the residual w = v - S_decayed kh of every token (so
//     the states can be rebuilt later without any cross-row reduction);
//  3. KdaBackwardKernel: one cluster of kClusterSize CTAs per (segment, head), each CTA owning
//     kRowsPerCta state rows. Thread (half, k) keeps column k of kRowsPerThread rows of dS in
//     registers, from the segment's end gradient. Chunks are walked backwards; a chunk's states
//     are rebuilt from its checkpoint (sub-chunk checkpoints in shared memory, the sub-chunk's
//     states in registers), then each token's adjoint step runs with one 128-thread reduction
//     (du, a sum over k). The sums over rows (dqh, dkh, d(decay), dbeta) are exact per-CTA
//     partials in shared memory; after each sub-chunk the cluster syncs and CTA r adds the
//     partials of the sub-chunk's token r from all CTAs through distributed shared memory in rank
//     order, and finishes that token (norms, gate, sigmoid chain rules). Segment 0's CTAs end
//     with dinitial_state. No atomics; every sum has a fixed order.
//  4. KdaParamReduceKernel adds the per-CTA dA_log / ddt_bias partials in a fixed order.
#include <cooperative_groups.h>

#include <atomic>

#include "cluster_sync.cuh"
#include "kda_chunked_backward.cuh"
#include "kda_cluster_launch.cuh"
#include "kda_common.cuh"
#include "per_device_memo.h"

namespace cg = cooperative_groups;

namespace cakegrad::kernels {
namespace kda_cuda {
namespace {

struct BwdTraits {
  static constexpr int kClusterSize = static_cast<int>(kda_layout::kRowSplit);
  static constexpr int kRowsPerCta = kDim / kClusterSize;
  static constexpr int kHalves = 2;  // thread groups of 128 (one column each), splitting rows
  static constexpr int kThreads = kHalves * kDim;
  static constexpr int kRowsPerThread = kRowsPerCta / kHalves;
  static constexpr int kWarpsPerHalf = kDim / 32;
  static constexpr int kChunk = static_cast<int>(kda_layout::kCheckpointInterval);
  static constexpr int kSub = kClusterSize;  // CTA r of the cluster finishes token r of a sub-chunk
  static constexpr int kSubPerChunk = kChunk / kSub;
  static_assert(kClusterSize * kRowsPerCta == kDim, "the cluster covers all rows");
  static_assert(kClusterSize <= 8, "portable cluster size");
  static_assert(kHalves * kRowsPerThread == kRowsPerCta, "halves cover the CTA's rows");
  static_assert(kRowsPerThread == 8, "the transposed warp reduction handles 8 rows");
  static_assert(kChunk % kSub == 0, "chunks are whole sub-chunks");
  static_assert(kDim % 32 == 0, "whole warps per half");
};

struct BwdSmem {
  // Per-token vectors of the current chunk.
  double kh[BwdTraits::kChunk][kDim];
  double qh[BwdTraits::kChunk][kDim];
  double d[BwdTraits::kChunk][kDim];
  double bt[BwdTraits::kChunk];
  double rq[BwdTraits::kChunk];
  double rk[BwdTraits::kChunk];
  // Per-token values of this CTA's rows.
  double u[BwdTraits::kChunk][BwdTraits::kRowsPerCta];
  double sdo[BwdTraits::kChunk][BwdTraits::kRowsPerCta];  // scale * do
  double w[BwdTraits::kChunk][BwdTraits::kRowsPerCta];
  double sdu[BwdTraits::kChunk][BwdTraits::kHalves];  // sum over a half's rows of sdo * u
  // States at the sub-chunk starts, [sub-chunk][row in thread][thread].
  double subck[BwdTraits::kSubPerChunk][BwdTraits::kRowsPerThread][BwdTraits::kThreads];
  // du reduction across a half's warps, double-buffered by token parity.
  double red[2][BwdTraits::kHalves * BwdTraits::kWarpsPerHalf][BwdTraits::kRowsPerThread];
  // Row-sum partials of the sub-chunk's tokens: [token][half][dqh, dkh, dd][k], and dbeta.
  double part[BwdTraits::kSub][BwdTraits::kHalves][3][kDim];
  double pbt[BwdTraits::kSub][BwdTraits::kHalves];
  double fin[BwdTraits::kHalves][BwdTraits::kWarpsPerHalf];
};

// The backward kernel reads the row passes' and scans' workspace (SeqBwdArgs) and writes the
// token gradients and its parameter partials.
struct BwdArgs : SeqBwdArgs {
  uint16_t* dq;
  uint16_t* dk;
  uint16_t* dv;
  uint16_t* dg;
  uint16_t* dbeta;
  double* param_partials;  // [segment slots, H, kClusterSize, 2, 128]
};

// Barrier of one half's 128 threads (ids 1 and 2; 0 is __syncthreads).
__device__ __forceinline__ void HalfBarrier(int half) { NamedBarrierSync(1 + half, kDim); }

// Sums v[0..7] over the 32 lanes of a warp with 9 shuffles: after the three halving steps lane l
// holds (a partial of) row (l >> 2) & 7, and two plain xor steps finish it.
__device__ __forceinline__ double WarpSum8Transposed(const double (&v)[8], int lane) {
  double b[4], c[2];
  const bool hi16 = (lane & 16) != 0;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const double send = hi16 ? v[m] : v[m + 4];
    const double keep = hi16 ? v[m + 4] : v[m];
    b[m] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
  }
  const bool hi8 = (lane & 8) != 0;
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const double send = hi8 ? b[m] : b[m + 2];
    const double keep = hi8 ? b[m + 2] : b[m];
    c[m] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
  }
  const bool hi4 = (lane & 4) != 0;
  const double send = hi4 ? c[0] : c[1];
  double x = (hi4 ? c[1] : c[0]) + __shfl_xor_sync(0xffffffffu, send, 4);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x;
}

// Sum over the 128 threads of one half, in a fixed order; every thread of the half gets it.
__device__ __forceinline__ double HalfSum(double x, int half, int warp, int lane, BwdSmem& sm) {
  x = WarpSum(x);
  if (lane == 0) sm.fin[half][warp % BwdTraits::kWarpsPerHalf] = x;
  HalfBarrier(half);
  double s = 0.0;
#pragma unroll
  for (int i = 0; i < BwdTraits::kWarpsPerHalf; ++i) s += sm.fin[half][i];
  return s;
}

__global__ void __cluster_dims__(BwdTraits::kClusterSize, 1, 1)
    __launch_bounds__(BwdTraits::kThreads, 1) KdaBackwardKernel(const __grid_constant__ BwdArgs a) {
  using Tr = BwdTraits;
  constexpr int R = Tr::kRowsPerThread;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  BwdSmem& sm = *reinterpret_cast<BwdSmem*>(smem_raw);
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t slot = blockIdx.x / Tr::kClusterSize;
  const int64_t h = blockIdx.y;
  const int64_t H = a.s.H;
  const int tid = threadIdx.x;
  const int k = tid % kDim;
  const int half = tid / kDim;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int hrow = half * R;                       // first row of this half, CTA-local
  const int row0 = rank * Tr::kRowsPerCta + hrow;  // first row of this thread, global
  double* pp = a.param_partials + ((slot * H + h) * Tr::kClusterSize + rank) * 2 * kDim;

  int64_t n, bos, eos, seg;
  if (!LocateSlot(a.s, slot, a.s.segment, &n, &bos, &eos, &seg)) {
    // A gap slot (the whole cluster): its partials are zeros for the fixed-order reduce.
    if (half == 1) pp[k] = pp[kDim + k] = 0.0;
    return;
  }
  const int64_t sbeg = bos + seg * a.s.segment;
  const int64_t send = min(eos, sbeg + a.s.segment);

  const int64_t state_off = (slot * H + h) * kDimSq;
  double dS[R];
#pragma unroll
  for (int i = 0; i < R; ++i) dS[i] = a.seg_grad[state_off + (row0 + i) * kDim + k];
  const double exp_a = exp(static_cast<double>(a.A_log[h]));
  const float* dt_bias_h = a.dt_bias + h * kDim;
  const double lb = a.s.lower_bound;
  const double scale = a.s.scale;
  double p_dt = 0.0, p_alog = 0.0;  // this CTA's ddt_bias[k] / dA_log terms (half 1 finishes)

  const int64_t chunks = (send - sbeg + Tr::kChunk - 1) / Tr::kChunk;
  for (int64_t c = chunks - 1; c >= 0; --c) {
    const int64_t tc0 = sbeg + c * Tr::kChunk;
    const int nc = static_cast<int>(min(int64_t{Tr::kChunk}, send - tc0));
    __syncthreads();  // the previous chunk's vectors are no longer read
    for (int tb = warp; tb < nc; tb += Tr::kThreads / 32) {
      const RawToken64 r = LoadToken64(a.q, a.k, a.tok_d, a.tok_s, tc0 + tb, H, h);
      StoreToken64(r, sm.kh[tb], sm.qh[tb], sm.d[tb]);
      if (lane == 0) {
        sm.bt[tb] = r.s.bt;
        sm.rq[tb] = r.s.rq;
        sm.rk[tb] = r.s.rk;
      }
    }
    __syncthreads();
    for (int idx = tid; idx < nc * Tr::kRowsPerCta; idx += Tr::kThreads) {
      const int tb = idx / Tr::kRowsPerCta;
      const int r = idx % Tr::kRowsPerCta;
      const int64_t gi = ((tc0 + tb) * H + h) * kDim + rank * Tr::kRowsPerCta + r;
      const double w = a.residual[gi];
      sm.w[tb][r] = w;
      sm.u[tb][r] = __dmul_rn(sm.bt[tb], w);  // the recompute pass's u, bit for bit
      sm.sdo[tb][r] = scale * Bf16(a.d_o[gi]);
    }
    __syncthreads();
    if (tid < nc * Tr::kHalves) {
      const int tb = tid / Tr::kHalves;
      const int hf = tid % Tr::kHalves;
      double s = 0.0;
#pragma unroll
      for (int i = 0; i < R; ++i) s = fma(sm.sdo[tb][hf * R + i], sm.u[tb][hf * R + i], s);
      sm.sdu[tb][hf] = s;
    }

    // Rebuild the chunk forward from its checkpoint, keeping the sub-chunk starts.
    double S[R];
    {
      const double* ck = CheckpointAt(a.checkpoints, bos, n, tc0, H, h);
#pragma unroll
      for (int i = 0; i < R; ++i) S[i] = ck[(row0 + i) * kDim + k];
    }
    for (int tb = 0; tb < nc; ++tb) {
      if (tb % Tr::kSub == 0) {
#pragma unroll
        for (int i = 0; i < R; ++i) sm.subck[tb / Tr::kSub][i][tid] = S[i];
      }
      const double dk_ = sm.d[tb][k];
      const double kh = sm.kh[tb][k];
#pragma unroll
      for (int i = 0; i < R; ++i) S[i] = StateStep(S[i], dk_, sm.u[tb][hrow + i], kh);
    }
    __syncthreads();  // sdu

    const int nsub = (nc + Tr::kSub - 1) / Tr::kSub;
    for (int sc = nsub - 1; sc >= 0; --sc) {
      const int ns = min(Tr::kSub, nc - sc * Tr::kSub);
      // Sb[j] = state before token j of the sub-chunk.
      double Sb[Tr::kSub][R];
#pragma unroll
      for (int i = 0; i < R; ++i) S[i] = sm.subck[sc][i][tid];
#pragma unroll
      for (int j = 0; j < Tr::kSub; ++j) {
        if (j < ns) {
          const int tb = sc * Tr::kSub + j;
          const double dk_ = sm.d[tb][k];
          const double kh = sm.kh[tb][k];
#pragma unroll
          for (int i = 0; i < R; ++i) {
            Sb[j][i] = S[i];
            S[i] = StateStep(S[i], dk_, sm.u[tb][hrow + i], kh);
          }
        }
      }
#pragma unroll
      for (int j = Tr::kSub - 1; j >= 0; --j) {
        if (j < ns) {
          const int tb = sc * Tr::kSub + j;
          const int64_t t = tc0 + tb;
          const double dk_ = sm.d[tb][k];
          const double kh = sm.kh[tb][k];
          const double qh = sm.qh[tb][k];
          const double bt = sm.bt[tb];
          double sdo[R], u[R];
#pragma unroll
          for (int i = 0; i < R; ++i) {
            sdo[i] = sm.sdo[tb][hrow + i];
            u[i] = sm.u[tb][hrow + i];
          }
          // o_t = scale * S_t qh: dS_t += sdo qh^T; dqh uses S_t = S_prev * d + u kh^T.
          double X = 0.0, W = 0.0, p[R];
#pragma unroll
          for (int i = 0; i < R; ++i) {
            X = fma(sdo[i], Sb[j][i], X);
            dS[i] = fma(sdo[i], qh, dS[i]);
            p[i] = dS[i] * kh;
            W = fma(dS[i], u[i], W);
          }
          // du[v] = sum_k dS_t[v, k] kh[k]: warp, then the half's 4 warps in order.
          const double wsum = WarpSum8Transposed(p, lane);
          const int buf = j & 1;
          if ((lane & 3) == 0) sm.red[buf][warp][(lane >> 2) & 7] = wsum;
          HalfBarrier(half);
          double du[R];
#pragma unroll
          for (int i = 0; i < R; ++i) {
            double s = 0.0;
#pragma unroll
            for (int ww = 0; ww < Tr::kWarpsPerHalf; ++ww) {
              s += sm.red[buf][half * Tr::kWarpsPerHalf + ww][i];
            }
            du[i] = s;
          }
          if (k == 0) {
            // dv = bt du; dbeta's row sum du . w.
            uint32_t packed[R / 2];
            double pb = 0.0;
#pragma unroll
            for (int i = 0; i < R; i += 2) {
              packed[i / 2] = uint32_t(ToBf16(static_cast<float>(bt * du[i]))) |
                              (uint32_t(ToBf16(static_cast<float>(bt * du[i + 1]))) << 16);
            }
#pragma unroll
            for (int i = 0; i < R; ++i) pb = fma(du[i], sm.w[tb][hrow + i], pb);
            *reinterpret_cast<uint4*>(a.dv + (t * H + h) * kDim + row0) =
                make_uint4(packed[0], packed[1], packed[2], packed[3]);
            sm.pbt[j][half] = pb;
          }
          double Y = 0.0, Z = 0.0;
#pragma unroll
          for (int i = 0; i < R; ++i) {
            const double dpred = -bt * du[i];
            Y = fma(dpred, Sb[j][i], Y);
            const double dsd = fma(dpred, kh, dS[i]);
            Z = fma(dsd, Sb[j][i], Z);
            dS[i] = dsd * dk_;
          }
          sm.part[j][half][0][k] = fma(dk_, X, kh * sm.sdu[tb][half]);
          sm.part[j][half][1][k] = fma(dk_, Y, W);
          sm.part[j][half][2][k] = Z;
        }
      }

      cluster.sync();  // every CTA's partials of this sub-chunk are visible cluster-wide
      if (rank < ns) {
        const int tb = sc * Tr::kSub + rank;
        const int64_t t = tc0 + tb;
        const int64_t gi = (t * H + h) * kDim + k;
        if (half == 0) {
          double dqh = 0.0;
          for (int src = 0; src < Tr::kClusterSize; ++src) {
            const BwdSmem* rs = cluster.map_shared_rank(&sm, src);
#pragma unroll
            for (int hf = 0; hf < Tr::kHalves; ++hf) dqh += rs->part[rank][hf][0][k];
          }
          const double qh = sm.qh[tb][k];
          const double qd = HalfSum(qh * dqh, half, warp, lane, sm);
          a.dq[gi] = ToBf16(static_cast<float>((dqh - qh * qd) * sm.rq[tb]));
          if (k == 0) {
            double dbt = 0.0;
            for (int src = 0; src < Tr::kClusterSize; ++src) {
              const BwdSmem* rs = cluster.map_shared_rank(&sm, src);
#pragma unroll
              for (int hf = 0; hf < Tr::kHalves; ++hf) dbt += rs->pbt[rank][hf];
            }
            const double bt = sm.bt[tb];
            a.dbeta[t * H + h] = ToBf16(static_cast<float>(dbt * bt * (1.0 - bt)));
          }
        } else {
          double dkh = 0.0, dd = 0.0;
          for (int src = 0; src < Tr::kClusterSize; ++src) {
            const BwdSmem* rs = cluster.map_shared_rank(&sm, src);
#pragma unroll
            for (int hf = 0; hf < Tr::kHalves; ++hf) {
              dkh += rs->part[rank][hf][1][k];
              dd += rs->part[rank][hf][2][k];
            }
          }
          const double kh = sm.kh[tb][k];
          const double kd = HalfSum(kh * dkh, half, warp, lane, sm);
          a.dk[gi] = ToBf16(static_cast<float>((dkh - kh * kd) * sm.rk[tb]));
          // d = exp(lb * sigmoid(z)), z = exp(A_log) (g + dt_bias): dz, then dg = dz exp(A_log).
          // sigmoid'(z) as sigmoid(z) sigmoid(-z): 1 - sigmoid(z) would cancel for large z.
          const double z = exp_a * (static_cast<double>(Bf16(a.g[gi])) + dt_bias_h[k]);
          const double e = exp(-z);
          const double sg = 1.0 / (1.0 + e);
          const double dz = dd * sm.d[tb][k] * lb * (sg * (e * sg));
          const double dgv = dz * exp_a;
          a.dg[gi] = ToBf16(static_cast<float>(dgv));
          p_dt += dgv;
          p_alog += dz * z;
        }
      }
      cluster.sync();  // nobody reads this sub-chunk's partials any more
    }
  }

  if (seg == 0 && a.dinitial_state != nullptr) {
    const int64_t doc_off = (n * H + h) * kDimSq;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      a.dinitial_state[doc_off + (row0 + i) * kDim + k] = static_cast<float>(dS[i]);
    }
  }
  if (half == 1) {
    pp[k] = p_dt;
    pp[kDim + k] = p_alog;
  }
}

// ddt_bias[h, k] and dA_log[h]: fixed-order sums of the per-CTA partials over segment slots and
// ranks, then over k for dA_log.
__global__ void __launch_bounds__(kDim)
    KdaParamReduceKernel(const double* __restrict__ pp, int64_t slots, int64_t H, float* dA_log,
                         float* ddt_bias) {
  __shared__ double warp_sums[kDim / 32];
  const int64_t h = blockIdx.x;
  const int k = threadIdx.x;
  double sdt = 0.0, sa = 0.0;
  for (int64_t n = 0; n < slots; ++n) {
    for (int r = 0; r < BwdTraits::kClusterSize; ++r) {
      const double* p = pp + ((n * H + h) * BwdTraits::kClusterSize + r) * 2 * kDim;
      sdt += p[k];
      sa += p[kDim + k];
    }
  }
  ddt_bias[h * kDim + k] = static_cast<float>(sdt);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sa += __shfl_xor_sync(0xffffffffu, sa, o);
  if ((k & 31) == 0) warp_sums[k >> 5] = sa;
  __syncthreads();
  if (k == 0) {
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < kDim / 32; ++i) s += warp_sums[i];
    dA_log[h] = static_cast<float>(s);
  }
}

}  // namespace

Status KdaBackwardSequentialCuda(const KdaBwdParams& p, cudaStream_t stream) {
  using kda_cuda::BwdTraits;
  kda_cuda::SeqBwdArgs f{};
  Status st = kda_cuda::CheckBackwardParams(p, &f.s);
  if (!st.ok()) return st;
  const kda_layout::BwdLayout layout = kda_layout::MakeBwdLayout(p.B, p.T, p.H, p.num_docs);
  char* ws = static_cast<char*>(p.workspace);
  kda_cuda::SetFwdInputs(p, &f);
  f.d_o = p.d_o;
  f.dfinal_state = p.dfinal_state;
  f.checkpoints = reinterpret_cast<double*>(ws + layout.checkpoints);
  f.residual = reinterpret_cast<double*>(ws + layout.residual);
  f.tok_d = reinterpret_cast<double*>(ws + layout.tok_d);
  f.tok_s = reinterpret_cast<double*>(ws + layout.tok_s);
  f.seg_map = reinterpret_cast<double*>(ws + layout.seg_map);
  f.seg_grad = reinterpret_cast<double*>(ws + layout.seg_grad);
  f.dinitial_state = p.dinitial_state;
  double* partials = reinterpret_cast<double*>(ws + layout.param_partials);
  constexpr int kSmem = static_cast<int>(sizeof(kda_cuda::BwdSmem));
  static std::atomic<uint64_t> done{0};
  const Status attr =
      kda_cuda::AllowSmem(kda_cuda::KdaBackwardKernel, kSmem, &done, "the backward");
  if (!attr.ok()) return attr;
  // The segment length is chosen for whole waves of the backward's resident clusters.
  static PerDeviceMemo resident_clusters;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(BwdTraits::kClusterSize);
  cfg.blockDim = dim3(BwdTraits::kThreads);
  cfg.dynamicSmemBytes = kSmem;
  int clusters = 0;
  const Status resident = kda_cuda::ResidentClusters(kda_cuda::KdaBackwardKernel, cfg,
                                                     &resident_clusters, "the backward", &clusters);
  if (!resident.ok()) return resident;
  f.s.segment = kda_layout::SegmentLength(f.s.total_tokens, f.s.N, f.s.H, clusters);
  const int64_t slots =
      f.s.N > 0 ? kda_layout::SegmentSlots(f.s.total_tokens, f.s.N, f.s.segment) : int64_t{0};
  if (slots * BwdTraits::kClusterSize > 0x7fffffff) {
    return InvalidArgument("kda: too many tokens for one call");
  }

  if (f.s.N > 0) {
    const Status tokens = kda_cuda::LaunchTokenPass(f, stream);
    if (!tokens.ok()) return tokens;
    const Status transitions = kda_cuda::LaunchRowPass(f, kda_cuda::RowPass::kTransitions, stream);
    if (!transitions.ok()) return transitions;
    const Status scans = kda_cuda::LaunchSegmentScans(f, stream);
    if (!scans.ok()) return scans;
    const Status recompute = kda_cuda::LaunchRowPass(f, kda_cuda::RowPass::kRecompute, stream);
    if (!recompute.ok()) return recompute;
    kda_cuda::BwdArgs b{};
    static_cast<kda_cuda::SeqBwdArgs&>(b) = f;
    b.dq = p.dq;
    b.dk = p.dk;
    b.dv = p.dv;
    b.dg = p.dg;
    b.dbeta = p.dbeta;
    b.param_partials = partials;
    const dim3 grid(static_cast<unsigned>(BwdTraits::kClusterSize * slots),
                    static_cast<unsigned>(f.s.H));
    kda_cuda::KdaBackwardKernel<<<grid, BwdTraits::kThreads, kSmem, stream>>>(b);
    Status bwd = kda_cuda::CheckLaunch("the backward");
    if (!bwd.ok()) return bwd;
  }
  kda_cuda::KdaParamReduceKernel<<<static_cast<unsigned>(f.s.H), kda_cuda::kDim, 0, stream>>>(
      partials, slots, f.s.H, p.dA_log, p.ddt_bias);
  return kda_cuda::CheckLaunch("the parameter reduce");
}

}  // namespace kda_cuda

Status KdaBackwardCuda(const KdaBwdParams& p, cudaStream_t stream) {
  if (ResolveKdaBackwardAlgorithm(p.algorithm, p.H) == KdaBackwardAlgorithm::kChunked) {
    return kda_cuda::KdaBackwardChunkedCuda(p, stream);
  }
  return kda_cuda::KdaBackwardSequentialCuda(p, stream);
}

}  // namespace cakegrad::kernels
