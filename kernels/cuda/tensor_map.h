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
// No L2 promotion: the kernels' boxes have 128-byte rows whose neighbours another box (or CTA)
// reads, and 256-byte promotion made each row's miss fetch its neighbour too, so that the
// neighbour's own request became an extra L2 lookup and a second trip through the fabric between
// the L2 partitions. H200 (tools/gpu/probes/stream_read_probe.cu, bench/results/mhc_h200.md,
// twenty-fourth session): forward_stats' TMA ring read X at 3.88 TB/s with it, 4.37 without (bulk
// copies of contiguous 64 KB: 4.37); forward_stats 0.164 -> 0.154 ms at T = 16384, the other mHC
// and the KDA kernels unchanged.
inline Status EncodeTiledMap(CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base,
                             const cuuint64_t* dims, const cuuint64_t* strides,
                             const cuuint32_t* box, CUtensorMapSwizzle swizzle, const char* name) {
  tensor_map_internal::EncodeTiledFn encode = nullptr;
  Status got = tensor_map_internal::GetEncodeTiled(&encode, name);
  if (!got.ok()) return got;
  const cuuint32_t ones[3] = {1, 1, 1};
  const CUresult r = encode(map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), dims,
                            strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return Internal(std::string(name) + ": cuTensorMapEncodeTiled failed (" + std::to_string(r) +
                    ")");
  }
  return OkStatus();
}

}  // namespace cakegrad::kernels
