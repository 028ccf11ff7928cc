// Recurrent KDA (Kimi Delta Attention), head dimension K = V = 128, FP32 value-first state.
// Math and contracts: SPEC.md section 3, seed 004. Pointers are device pointers for the *Cuda
// entry points and host pointers for the *Reference ones; shapes, dtypes and contiguity are
// validated by the caller (the server's validation layer) before any call here. The CUDA entry
// points need every tensor pointer 16-byte aligned (vector loads).
//
// Documents: without cu_seqlens there are N = B documents, document b being tokens [b*T, b*T+T)
// of the flattened [B*T, H, 128] token axis. With cu_seqlens, B must be 1 and the N documents
// are packed along T. Empty and 1-token documents are allowed; T == 0 is allowed.
#pragma once

#include <cstdint>

#include "cakegrad/kernels/status.h"
#include "cakegrad/kernels/tensor.h"

namespace cakegrad::kernels {

constexpr int kKdaHeadDim = 128;                          // K = V = 128, fixed by the contract
constexpr float kKdaDefaultScale = 0.08838834764831845f;  // 1 / sqrt(128)
constexpr float kKdaDefaultLowerBound = -5.0f;

struct KdaFwdParams {
  const uint16_t* q = nullptr;           // BF16 [B, T, H, 128]
  const uint16_t* k = nullptr;           // BF16 [B, T, H, 128]
  const uint16_t* v = nullptr;           // BF16 [B, T, H, 128]
  const uint16_t* g = nullptr;           // BF16 [B, T, H, 128] raw gate
  const uint16_t* beta = nullptr;        // BF16 [B, T, H] raw beta logits
  const float* A_log = nullptr;          // FP32 [H]
  const float* dt_bias = nullptr;        // FP32 [H, 128]
  const float* initial_state = nullptr;  // FP32 [N, H, 128, 128] (value-first) or nullptr: zeros
  const void* cu_seqlens = nullptr;      // [N + 1], seqlens_dtype, or nullptr (N = B)
  DType seqlens_dtype = DType::kINT64;   // kINT32 or kINT64
  uint16_t* o = nullptr;                 // BF16 [B, T, H, 128] output
  float* final_state = nullptr;          // FP32 [N, H, 128, 128] output, or nullptr: not written
  void* workspace = nullptr;             // scratch, >= KdaForwardWorkspaceBytes; never zeroed
  int64_t workspace_bytes = 0;
  int64_t B = 0;                              // batch; must be 1 with cu_seqlens
  int64_t T = 0;                              // tokens per batch row (packed total with cu_seqlens)
  int64_t H = 0;                              // heads, >= 1
  int64_t num_docs = 0;                       // N; cu_seqlens has N + 1 entries; without it N = B
                                              // (0 is taken as B)
  float scale = kKdaDefaultScale;             // output scale, > 0
  float lower_bound = kKdaDefaultLowerBound;  // gate lower bound, in [-5, 0)
  uint32_t* device_status = nullptr;  // DeviceStatusBits, device memory (CUDA only; may be null)
};

// Which CUDA kernels serve KdaBackwardCuda. The chunked one is 4x-12x faster on the H200 and
// meets SPEC on every output but one: dA_log, an [H] vector, is a strongly cancelling sum per
// head (at one head, on some draws, its terms add up to ~7000 times its size), and the chunked
// form's FP32 terms leave a per-head error that rel-L2 over the H heads hides only when the heads
// do not all cancel at once. Measured with both backwards on the same random draws
// (bench/results/kda_h200.md, twenty-first session): chunked at H = 1 over 1e-4 on 3 of 700
// draws; H = 2 on none of ~4700, but up to 9.2e-5; thirty-first session, 2026-12-01: at
// (2, 65, 1) 2 of 300 draws over, at two heads with slow decay over 4197 packed tokens 3 of 381
// (the worst 1.5e-4; a suite run met 1.6e-4), so up to ~1% of draws on such shapes, none of 958
// on three other shapes at two and three heads; H = 4 within 1.1e-5 on all of 1050 and within
// 3.6e-5 on 398 more. With every gate pinned near lower_bound (g ~ N(6, 1), fast decay) the tail
// reaches the default path too (thirty-seventh session, 2026-12-02, B = 2, T = 1000): H = 4 over
// 1e-4 on 2 of 874 draws (the worst 1.43e-4), H = 8 up to 9.2e-5 on 205; at issue #5's g ~ N(0, 1)
// and with slow decay at H = 4 none (within 3.5e-5 on 250 more). The error is ~1e-7 of the sum
// of dA_log's terms (FP32 gate gradients); the gate's sigmoid derivative taken with expf instead
// of the SFU's ex2 moved it by ~1%. The sequential one runs in FP64 (twenty-fifth session: dA_log
// within 5.7e-8 on 1000 draws at B = 2, T = 65, H = 1, where its FP32 form missed 1e-4 on about 1
// draw in 300), on segments of each document in parallel (twenty-seventh session: 1.55 ms at B = 1,
// T = 8192, H = 1, where the chunked one takes 0.36). kAuto therefore takes the chunked kernels
// from kKdaChunkedBackwardMinHeads heads on: at T = 8192 the sequential ones take 5.4 / 10.1 ms
// at H = 4 / 8 against the chunked ones' 0.62 / 1.0 (thirty-seventh session), and the fast-decay
// tail above does not thin from 4 heads to 8, so no head count would avoid it.
enum class KdaBackwardAlgorithm { kAuto, kSequential, kChunked };

constexpr int64_t kKdaChunkedBackwardMinHeads = 4;

// The kernels a call with `H` heads runs (kAuto resolved; the others as asked).
constexpr KdaBackwardAlgorithm ResolveKdaBackwardAlgorithm(KdaBackwardAlgorithm asked, int64_t H) {
  if (asked != KdaBackwardAlgorithm::kAuto) return asked;
  return H >= kKdaChunkedBackwardMinHeads ? KdaBackwardAlgorithm::kChunked
                                          : KdaBackwardAlgorithm::kSequential;
}

struct KdaBwdParams {
  const uint16_t* q = nullptr;           // BF16 [B, T, H, 128]
  const uint16_t* k = nullptr;           // BF16 [B, T, H, 128]
  const uint16_t* v = nullptr;           // BF16 [B, T, H, 128]
  const uint16_t* g = nullptr;           // BF16 [B, T, H, 128] raw gate
  const uint16_t* beta = nullptr;        // BF16 [B, T, H] raw beta logits
  const float* A_log = nullptr;          // FP32 [H]
  const float* dt_bias = nullptr;        // FP32 [H, 128]
  const float* initial_state = nullptr;  // FP32 [N, H, 128, 128] or nullptr: zeros
  const uint16_t* d_o = nullptr;         // BF16 [B, T, H, 128] adjoint of o ("do")
  const float* dfinal_state = nullptr;   // FP32 [N, H, 128, 128] or nullptr: zeros
  const void* cu_seqlens = nullptr;      // [N + 1], seqlens_dtype, or nullptr (N = B)
  DType seqlens_dtype = DType::kINT64;   // kINT32 or kINT64
  uint16_t* dq = nullptr;                // BF16 [B, T, H, 128] output
  uint16_t* dk = nullptr;                // BF16 [B, T, H, 128] output
  uint16_t* dv = nullptr;                // BF16 [B, T, H, 128] output
  uint16_t* dg = nullptr;                // BF16 [B, T, H, 128] output
  uint16_t* dbeta = nullptr;             // BF16 [B, T, H] output
  float* dA_log = nullptr;               // FP32 [H] output (overwritten, not accumulated)
  float* ddt_bias = nullptr;             // FP32 [H, 128] output (overwritten)
  float* dinitial_state = nullptr;       // FP32 [N, H, 128, 128] output
  void* workspace = nullptr;             // scratch, >= KdaBackwardWorkspaceBytes; never zeroed
  int64_t workspace_bytes = 0;
  int64_t B = 0;                              // batch; must be 1 with cu_seqlens
  int64_t T = 0;                              // tokens per batch row (packed total with cu_seqlens)
  int64_t H = 0;                              // heads, >= 1
  int64_t num_docs = 0;                       // N; see KdaFwdParams::num_docs
  float scale = kKdaDefaultScale;             // output scale, > 0
  float lower_bound = kKdaDefaultLowerBound;  // gate lower bound, in [-5, 0)
  uint32_t* device_status = nullptr;  // DeviceStatusBits, device memory (CUDA only; may be null)
  KdaBackwardAlgorithm algorithm = KdaBackwardAlgorithm::kAuto;  // CUDA only
};

// Bytes of scratch the CUDA forward / backward need for these shapes (num_docs as in the params:
// N, or 0 for N = B). Depends on shapes only, never on cu_seqlens contents, so one buffer serves
// every call of that shape. Defined without CUDA: host-only builds link them.
int64_t KdaForwardWorkspaceBytes(int64_t B, int64_t T, int64_t H, int64_t num_docs);
int64_t KdaBackwardWorkspaceBytes(int64_t B, int64_t T, int64_t H, int64_t num_docs);

// FP64 references (host memory; the daemon's host backend). They validate cu_seqlens, which the
// host can read: cu[0] == 0, non-decreasing, cu[N] == B*T; kInvalidArgument otherwise. The
// workspace fields are ignored (the references allocate what they need).
Status KdaForwardReference(const KdaFwdParams& p);
Status KdaBackwardReference(const KdaBwdParams& p);

// CUDA kernels (device memory), enqueued on `stream`; no host synchronization, graph-capturable
// once the workspace exists, bitwise deterministic. Malformed cu_seqlens are clamped (never an
// out-of-bounds access) and raise kDeviceStatusBadCuSeqlens in *device_status.
Status KdaForwardCuda(const KdaFwdParams& p, cudaStream_t stream);
Status KdaBackwardCuda(const KdaBwdParams& p, cudaStream_t stream);

}  // namespace cakegrad::kernels
