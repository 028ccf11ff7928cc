// The sequential KDA backward's segment scans (kda_backward.cu): what lets the segments of one
// (document, head) run their recompute and backward in parallel instead of one after another.
//
// Over a segment of tokens the state recurrence is affine in the state, S_end = S_start M + B
// (M = prod_t diag(d_t) (I - bt_t kh_t kh_t^T), B = the state built from zero), and the state
// gradient's recurrence is linear, G_start = G_end M^T + E (E = the gradient sent back from zero
// by the segment's own outputs). The row passes (kda_row_pass.cu) compute B, M and E of every
// segment at once; KdaSegmentScanKernel then walks each (document, head)'s segments in order, in
// FP64: the start state of each segment (into its first checkpoint, where the recompute pass
// starts), and in reverse the gradient at each segment's end (over E, where the backward starts).
// A scan step is a 128 x 128 x 128 product split over kCtas CTAs by rows, one step per segment of
// at least kda_layout::kSegmentMin tokens.
#include <atomic>

#include "cp_async.cuh"
#include "kda_common.cuh"

namespace cakegrad::kernels {
namespace kda_cuda {
namespace {

struct ScanTraits {
  static constexpr int kCtas = 16;  // per scan and (document, head)
  static constexpr int kRows = kDim / kCtas;
  static constexpr int kThreads = kDim;  // thread j: column j of the CTA's rows
  // A step's map M streams through shared memory in tiles of kKTile of the product's k, kStages
  // buffers with cp.async (kStages - 1 tiles in flight: one tile ahead left each tile waiting
  // for its L2 latency, ~7.5 us a step on the H200), across tiles and steps: the forward scan's
  // tile is rows k of M
  // ([kKTile][128], thread j reads column j), the reverse scan's columns k of every row
  // ([128][kRevStride], thread j reads row j; the odd number of 16-byte pieces a row keeps the
  // reads of a half-warp on distinct bank pairs but one).
  static constexpr int kKTile = 32;
  static constexpr int kStages = 4;
  static constexpr int kTilesPerStep = kDim / kKTile;
  static constexpr int kRevStride = kKTile + 2;
  static constexpr int kTileDoubles = kDim * kRevStride;
  static constexpr int kPiecesPerThread = kKTile * kDim / 2 / kThreads;  // 16-byte copies
  static_assert(kDim % kKTile == 0 && kKTile % 2 == 0, "whole tiles of 16-byte pieces");
};

struct ScanSmem {
  double X[kDim][ScanTraits::kRows];  // the carried rows, transposed: X[column][row]
  double tile[ScanTraits::kStages][ScanTraits::kTileDoubles];
};

// Issues the copies of tile t of map M into buf (one commit group).
__device__ __forceinline__ void IssueMapTile(const double* M, int t, bool reverse, double* buf) {
  using Tr = ScanTraits;
#pragma unroll
  for (int i = 0; i < Tr::kPiecesPerThread; ++i) {
    const int piece = i * Tr::kThreads + static_cast<int>(threadIdx.x);
    if (!reverse) {  // rows k0 .. k0 + kKTile - 1, 64 pieces a row
      const int kk = piece / (kDim / 2), c2 = piece % (kDim / 2);
      CpAsync<16>(buf + kk * kDim + 2 * c2, M + int64_t(t * Tr::kKTile + kk) * kDim + 2 * c2);
    } else {  // columns k0 .. k0 + kKTile - 1 of every row, kKTile / 2 pieces a row
      const int row = piece / (Tr::kKTile / 2), c2 = piece % (Tr::kKTile / 2);
      CpAsync<16>(buf + row * Tr::kRevStride + 2 * c2,
                  M + int64_t(row) * kDim + t * Tr::kKTile + 2 * c2);
    }
  }
  CpAsyncCommit();
}

// One scan over a (document, head)'s segments, kRows rows a CTA:
//   forward: X = initial state; for c = 0 .. segs - 2: X <- X M(c) + B(c), written over B(c) at
//            segment c + 1's first checkpoint (segment 0's gets the initial state);
//   reverse: X = dfinal_state; for c = segs - 1 .. 1: written over E(c), then X <- X M(c)^T +
//            E(c); segment 0's seg_grad gets the last X.
__global__ void __launch_bounds__(ScanTraits::kThreads)
    KdaSegmentScanKernel(const __grid_constant__ SeqBwdArgs a) {
  using Tr = ScanTraits;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  ScanSmem& sm = *reinterpret_cast<ScanSmem*>(smem_raw);
  const bool reverse = blockIdx.x >= Tr::kCtas;
  const int r0 = (blockIdx.x % Tr::kCtas) * Tr::kRows;
  const int64_t h = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int64_t H = a.s.H;
  const int j = threadIdx.x;

  int64_t bos, eos;
  DocBounds(a.s, n, &bos, &eos);
  const int64_t len = a.s.segment;
  const int64_t segs = (eos - bos + len - 1) / len;
  const int64_t state_off = (n * H + h) * kDimSq;
  auto start_checkpoint = [&](int64_t c) {
    const int64_t ck =
        bos / kda_layout::kCheckpointInterval + n + c * (len / kda_layout::kCheckpointInterval);
    return a.checkpoints + (ck * H + h) * kDimSq;
  };
  auto segment = [&](auto* base, int64_t c) {
    return base + ((bos / len + n + c) * H + h) * kDimSq;
  };
  auto elem = [&](int r) { return int64_t(r0 + r) * kDim + j; };

  const float* x0 = reverse ? a.dfinal_state : a.initial_state;
#pragma unroll
  for (int r = 0; r < Tr::kRows; ++r) sm.X[j][r] = x0 != nullptr ? x0[state_off + elem(r)] : 0.0;
  if (segs == 0) {
    // An empty document: dinitial_state is dfinal_state (no segment's backward will write it).
    if (reverse && a.dinitial_state != nullptr) {
#pragma unroll
      for (int r = 0; r < Tr::kRows; ++r) {
        a.dinitial_state[state_off + elem(r)] = static_cast<float>(sm.X[j][r]);
      }
    }
    return;
  }
  if (!reverse) {
#pragma unroll
    for (int r = 0; r < Tr::kRows; ++r) start_checkpoint(0)[elem(r)] = sm.X[j][r];
  }

  // Step i maps segment c = i (forward) or segs - 1 - i (reverse); segs - 1 steps in all.
  const int64_t steps = segs - 1;
  auto step_segment = [&](int64_t i) { return reverse ? segs - 1 - i : i; };
  auto map_of = [&](int64_t i) { return segment(a.seg_map, step_segment(i)); };
  const int64_t tiles = steps * Tr::kTilesPerStep;
  auto issue = [&](int64_t i) {
    IssueMapTile(map_of(i / Tr::kTilesPerStep), static_cast<int>(i % Tr::kTilesPerStep), reverse,
                 sm.tile[i % Tr::kStages]);
  };
  // Always kStages - 1 commit groups ahead (empty ones past the end), so that one wait count
  // serves every tile.
  for (int64_t i = 0; i < Tr::kStages - 1; ++i) {
    if (i < tiles) {
      issue(i);
    } else {
      CpAsyncCommit();
    }
  }
  double acc[Tr::kRows];
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t step = i / Tr::kTilesPerStep;
    const int t = static_cast<int>(i % Tr::kTilesPerStep);
    const int64_t c = step_segment(step);
    double* add = reverse ? segment(a.seg_grad, c) : start_checkpoint(c + 1);
    if (t == 0) {
#pragma unroll
      for (int r = 0; r < Tr::kRows; ++r) {
        acc[r] = add[elem(r)];
        if (reverse) add[elem(r)] = sm.X[j][r];  // segment c's backward starts from it
      }
    }
    // Tile i + kStages - 1 goes into the buffer tile i - 1 used (released by the barrier at the
    // end of the previous iteration).
    if (i + Tr::kStages - 1 < tiles) {
      issue(i + Tr::kStages - 1);
    } else {
      CpAsyncCommit();
    }
    CpAsyncWait<Tr::kStages - 1>();
    __syncthreads();  // tile i (and X) visible to all
    const double* tile = sm.tile[i % Tr::kStages];
#pragma unroll 4
    for (int kk = 0; kk < Tr::kKTile; ++kk) {
      const int k = t * Tr::kKTile + kk;
      const double m = reverse ? tile[j * Tr::kRevStride + kk] : tile[kk * kDim + j];
#pragma unroll
      for (int r = 0; r < Tr::kRows; ++r) acc[r] = fma(sm.X[k][r], m, acc[r]);
    }
    __syncthreads();  // every thread is done with tile i's buffer and with X
    if (t == Tr::kTilesPerStep - 1) {
#pragma unroll
      for (int r = 0; r < Tr::kRows; ++r) {
        sm.X[j][r] = acc[r];
        if (!reverse) add[elem(r)] = acc[r];
      }
      // The next tile's barrier orders these writes before X is read again.
    }
  }
  if (reverse) {
    __syncthreads();
    double* first = segment(a.seg_grad, 0);
#pragma unroll
    for (int r = 0; r < Tr::kRows; ++r) first[elem(r)] = sm.X[j][r];
  }
}

}  // namespace

Status LaunchSegmentScans(const SeqBwdArgs& a, cudaStream_t stream) {
  if (a.s.N == 0) return OkStatus();
  constexpr int kSmem = static_cast<int>(sizeof(ScanSmem));
  static std::atomic<uint64_t> done{0};
  const Status attr = AllowSmem(KdaSegmentScanKernel, kSmem, &done, "the segment scans");
  if (!attr.ok()) return attr;
  const dim3 grid(2 * ScanTraits::kCtas, static_cast<unsigned>(a.s.H),
                  static_cast<unsigned>(a.s.N));
  KdaSegmentScanKernel<<<grid, ScanTraits::kThreads, kSmem, stream>>>(a);
  return CheckLaunch("the segment scans");
}

}  // namespace kda_cuda
}  // namespace cakegrad::kernels
