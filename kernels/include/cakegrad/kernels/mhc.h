// mHC (manifold-constrained hyper-connections) with n = 4 residual streams and a Sinkhorn
// projection of the stream-mixing matrix. Math and contracts: SPEC.md section 1, seed 000.
// Pointers are device pointers for the *Cuda entry points and host pointers for the *Reference
// ones; shapes, dtypes and contiguity are validated by the caller (the server's validation
// layer) before any call here. The entry points check only what they rely on for memory
// safety and the option ranges (C, sinkhorn_iters, workspace size).
#pragma once

#include <cstdint>

#include "cakegrad/kernels/status.h"
#include "cakegrad/kernels/tensor.h"

namespace cakegrad::kernels {

constexpr int kMhcStreams = 4;          // n: residual streams
constexpr int kMhcLogits = 24;          // 4 pre + 4 post + 16 mixing logits per token
constexpr int kMhcStatsWidth = 64;      // floats per token in `stats`
constexpr int kMhcGradStatsWidth = 32;  // floats per token in `grad_stats`
constexpr int kMhcMaxSinkhornIters = 64;
constexpr int64_t kMhcMinC = 256;  // C is a multiple of kMhcCAlign in [kMhcMinC, kMhcMaxC]
constexpr int64_t kMhcMaxC = 16384;
constexpr int64_t kMhcCAlign = 256;

// Shared by forward_prepare and forward_stats, which must produce bitwise the same stats.
struct MhcFwdPrepareParams {
  const uint16_t* X = nullptr;   // BF16 [T, 4, C] residual streams
  const float* fn = nullptr;     // FP32 [24, 4C] mapping matrix
  const float* scale = nullptr;  // FP32 [3] group scales (pre, post, mixing)
  const float* base = nullptr;   // FP32 [24] logit offsets
  uint16_t* U = nullptr;         // BF16 [T, C] output: sum_a pre_a * X[t, a, :]
  float* stats = nullptr;        // FP32 [T, 64] output (layout: SPEC.md section 1)
  int64_t T = 0;                 // tokens
  int64_t C = 0;                 // channels per stream
  float rms_eps = 1e-5f;         // RMS-norm epsilon
  float hc_eps = 1e-6f;          // coefficient epsilon (pre, Sinkhorn)
  int32_t sinkhorn_iters = 20;   // 1..64
  void* workspace = nullptr;     // scratch, >= MhcForwardWorkspaceBytes(T, C); never zeroed
  int64_t workspace_bytes = 0;   // size of `workspace`
};

// forward_stats: the stats of forward_prepare without U (to recompute them for the backward).
struct MhcFwdStatsParams {
  const uint16_t* X = nullptr;   // BF16 [T, 4, C]
  const float* fn = nullptr;     // FP32 [24, 4C]
  const float* scale = nullptr;  // FP32 [3]
  const float* base = nullptr;   // FP32 [24]
  float* stats = nullptr;        // FP32 [T, 64] output, bitwise equal to forward_prepare's
  int64_t T = 0;                 // tokens
  int64_t C = 0;                 // channels per stream
  float rms_eps = 1e-5f;         // RMS-norm epsilon
  float hc_eps = 1e-6f;          // coefficient epsilon
  int32_t sinkhorn_iters = 20;   // 1..64
  void* workspace = nullptr;     // scratch, >= MhcForwardWorkspaceBytes(T, C); never zeroed
  int64_t workspace_bytes = 0;   // size of `workspace`
};

struct MhcFwdFinishParams {
  const uint16_t* X = nullptr;   // BF16 [T, 4, C]
  const uint16_t* B = nullptr;   // BF16 [T, C] branch output
  const float* stats = nullptr;  // FP32 [T, 64] from forward_prepare / forward_stats
  uint16_t* Y = nullptr;         // BF16 [T, 4, C] output: R^T X + post (x) B
  int64_t T = 0;                 // tokens
  int64_t C = 0;                 // channels per stream
};

struct MhcBwdPrepareParams {
  const uint16_t* X = nullptr;   // BF16 [T, 4, C]
  const uint16_t* dY = nullptr;  // BF16 [T, 4, C] gradient of Y
  const uint16_t* B = nullptr;   // BF16 [T, C] branch output of the forward
  const float* stats = nullptr;  // FP32 [T, 64]
  uint16_t* dB = nullptr;        // BF16 [T, C] output: sum_b post_b * dY[t, b, :]
  float* grad_stats = nullptr;   // FP32 [T, 32] output: [0:4] dpost, [4:20] dR, [20:32] zero
  int64_t T = 0;                 // tokens
  int64_t C = 0;                 // channels per stream
};

struct MhcBwdFinishParams {
  const uint16_t* X = nullptr;        // BF16 [T, 4, C]
  const uint16_t* dY = nullptr;       // BF16 [T, 4, C]
  const uint16_t* dU = nullptr;       // BF16 [T, C] gradient of U
  const float* fn = nullptr;          // FP32 [24, 4C]
  const float* scale = nullptr;       // FP32 [3]
  const float* base = nullptr;        // FP32 [24]
  const float* stats = nullptr;       // FP32 [T, 64]
  const float* grad_stats = nullptr;  // FP32 [T, 32] from backward_prepare
  uint16_t* dX = nullptr;             // BF16 [T, 4, C] output
  float* dfn = nullptr;               // FP32 [24, 4C] output (or accumulated into)
  float* dscale = nullptr;            // FP32 [3] output (or accumulated into)
  float* dbase = nullptr;             // FP32 [24] output (or accumulated into)
  int64_t T = 0;                      // tokens
  int64_t C = 0;                      // channels per stream
  float rms_eps = 1e-5f;              // RMS-norm epsilon of the forward
  float hc_eps = 1e-6f;               // coefficient epsilon of the forward
  int32_t sinkhorn_iters = 20;        // 1..64, as in the forward
  bool accumulate = false;            // true: add the token sums to dfn/dscale/dbase
  void* workspace = nullptr;          // scratch, >= MhcBackwardFinishWorkspaceBytes(T, C);
                                      // never zeroed, contents irrelevant on entry
  int64_t workspace_bytes = 0;        // size of `workspace`
};

// Bytes of scratch the CUDA kernels need for (T, C); they depend on shapes only, so one buffer
// serves every call of that shape. The references need none. Defined without CUDA, so host
// builds link. Negative or out-of-range shapes give 0.
// forward_prepare and forward_stats: fn's split (1.5 MB at C = 4096) and, at C = 4096,
// forward_stats' per-rank sums (1792 bytes a token, T rounded up to 32).
int64_t MhcForwardWorkspaceBytes(int64_t T, int64_t C);
int64_t MhcBackwardPrepareWorkspaceBytes(int64_t T, int64_t C);
int64_t MhcBackwardFinishWorkspaceBytes(int64_t T, int64_t C);

// FP64 references (host memory): the test oracle and the daemon's host backend. BF16 outputs are
// rounded once from FP64 (through FP32). They ignore the workspace fields.
Status MhcForwardPrepareReference(const MhcFwdPrepareParams& p);
Status MhcForwardStatsReference(const MhcFwdStatsParams& p);
Status MhcForwardFinishReference(const MhcFwdFinishParams& p);
Status MhcBackwardPrepareReference(const MhcBwdPrepareParams& p);
Status MhcBackwardFinishReference(const MhcBwdFinishParams& p);

// CUDA kernels (device memory, sm_90a), enqueued on `stream`; no host synchronization, no
// device-to-host reads, graph-capturable; bitwise deterministic for given shapes and options.
// T == 0 launches nothing (backward_finish then zeroes dfn/dscale/dbase unless accumulate).
Status MhcForwardPrepareCuda(const MhcFwdPrepareParams& p, cudaStream_t stream);
Status MhcForwardStatsCuda(const MhcFwdStatsParams& p, cudaStream_t stream);
Status MhcForwardFinishCuda(const MhcFwdFinishParams& p, cudaStream_t stream);
Status MhcBackwardPrepareCuda(const MhcBwdPrepareParams& p, cudaStream_t stream);
Status MhcBackwardFinishCuda(const MhcBwdFinishParams& p, cudaStream_t stream);

}  // namespace cakegrad::kernels
