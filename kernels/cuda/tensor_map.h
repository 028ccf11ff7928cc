// Tiled tensor maps for the kernels' tensor copies (TMA), encoded on the host with
// cuTensorMapEncodeTiled reached through the runtime's driver entry point, so that the libraries
// do not link against libcuda. The maps travel as __grid_constant__ kernel parameters, so calls
// stay graph-capturable.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "cakegrad/kernels/status.h"

namespace cakegrad::kernels {

namespace tensor_map_internal {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's encoder, looked up once per process (inline: one lookup for every family).
inline Status GetEncodeTiled(EncodeTiledFn* fn, const char* name) {
  static std::once_flag once;
  static EncodeTiledFn cached = nullptr;
  static cudaError_t err = cudaSuccess;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                           &q);
    if (err == cudaSuccess && q == cudaDriverEntryPointSuccess) {
      cached = reinterpret_cast<EncodeTiledFn>(p);
    }
  });
  if (cached == nullptr) {
    return Internal(std::string(name) +
                    ": cuTensorMapEncodeTiled unavailable: " + cudaGetErrorString(err));
  }
  *fn = cached;
  return OkStatus();
}

}  // namespace tensor_map_internal

// A tiled map of `rank` (<= 3) dims, innermost first, with boxes of `box`; `strides` are the
// rank - 1 outer strides in bytes. Elements past the tensor read as zero. `name` prefixes errors.
inline Status EncodeTiledMap(CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base,
                             const cuuint64_t* dims, const cuuint64_t* strides,
                             const cuuint32_t* box, CUtensorMapSwizzle swizzle, const char* name) {
  tensor_map_internal::EncodeTiledFn encode = nullptr;
  Status got = tensor_map_internal::GetEncodeTiled(&encode, name);
  if (!got.ok()) return got;
  const cuuint32_t ones[3] = {1, 1, 1};
  const CUresult r = encode(map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), dims,
                            strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return Internal(std::string(name) + ": cuTensorMapEncodeTiled failed (" + std::to_string(r) +
                    ")");
  }
  return OkStatus();
}

}  // namespace cakegrad::kernels
