// Causal depthwise conv1d (width 4) + SiLU over packed variable-length documents.
// Math and contracts: SPEC.md section 2, seed 002. Pointers are device pointers for the *Cuda
// entry points and host pointers for the *Reference ones; shapes are validated by the caller
// (the server's validation layer) before any call here.
#pragma once

#include <cstdint>

#include "cakegrad/kernels/status.h"
#include "cakegrad/kernels/tensor.h"

namespace cakegrad::kernels {

constexpr int kConv1dWidth = 4;

enum class SiluGradPreactivation : int32_t {
  kBF16 = 0,  // SiLU' at bf16(pre): the default, what flash-linear-attention uses.
  kFP32 = 1,  // SiLU' at the unrounded FP32 pre, FP64 final reduction.
};

struct Conv1dFwdParams {
  const uint16_t* x = nullptr;          // BF16 [S, C]
  const void* weight = nullptr;         // [C, 4], weight_dtype
  DType weight_dtype = DType::kFP32;    // kFP32 or kBF16
  const void* bias = nullptr;           // [C] or nullptr, bias_dtype
  DType bias_dtype = DType::kFP32;      // kFP32 or kBF16
  const void* cu_seqlens = nullptr;     // [num_docs + 1], seqlens_dtype
  DType seqlens_dtype = DType::kINT32;  // kINT32 or kINT64
  uint16_t* y = nullptr;                // BF16 [S, C] output
  int64_t S = 0;                        // packed tokens
  int64_t C = 0;                        // channels
  int64_t num_docs = 0;                 // N; cu_seqlens has N + 1 entries
  uint32_t* device_status = nullptr;    // DeviceStatusBits, device memory (CUDA only; may be null)
};

struct Conv1dBwdParams {
  const uint16_t* x = nullptr;   // BF16 [S, C]
  const void* weight = nullptr;  // [C, 4], weight_dtype
  DType weight_dtype = DType::kFP32;
  const void* bias = nullptr;  // [C] or nullptr
  DType bias_dtype = DType::kFP32;
  const void* cu_seqlens = nullptr;  // [num_docs + 1]
  DType seqlens_dtype = DType::kINT32;
  const uint16_t* dy = nullptr;  // BF16 [S, C]
  SiluGradPreactivation policy = SiluGradPreactivation::kBF16;
  uint16_t* dx = nullptr;   // BF16 [S, C] output
  void* dweight = nullptr;  // [C, 4] output, dweight_dtype
  DType dweight_dtype = DType::kFP32;
  void* dbias = nullptr;  // [C] output (required iff bias), dbias_dtype
  DType dbias_dtype = DType::kFP32;
  void* workspace = nullptr;  // scratch, >= Conv1dBackwardWorkspaceBytes; never zeroed
  int64_t workspace_bytes = 0;
  int64_t S = 0;
  int64_t C = 0;
  int64_t num_docs = 0;
  uint32_t* device_status = nullptr;  // DeviceStatusBits, device memory (CUDA only; may be null)
};

// Bytes of scratch the CUDA backward needs for (S, C): the maximum over every route, so one
// buffer serves any call of that shape. Depends on shapes only.
int64_t Conv1dBackwardWorkspaceBytes(int64_t S, int64_t C);

// FP64 references (host memory). They also validate cu_seqlens, which the host can read, and
// return kInvalidArgument for malformed offsets.
Status Conv1dForwardReference(const Conv1dFwdParams& p);
Status Conv1dBackwardReference(const Conv1dBwdParams& p);

// CUDA kernels (device memory), enqueued on `stream`; no host synchronization, graph-capturable.
// Malformed cu_seqlens raise kDeviceStatusBadCuSeqlens in *device_status.
Status Conv1dForwardCuda(const Conv1dFwdParams& p, cudaStream_t stream);
Status Conv1dBackwardCuda(const Conv1dBwdParams& p, cudaStream_t stream);

}  // namespace cakegrad::kernels
