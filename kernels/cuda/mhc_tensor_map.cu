#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "mhc_tensor_map.h"

namespace cakegrad::kernels::mhc_cuda {
namespace {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

Status GetEncodeTiled(EncodeTiledFn* fn, const char* name) {
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

}  // namespace

Status EncodeTiledMap(CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base,
                      const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                      CUtensorMapSwizzle swizzle, const char* name) {
  EncodeTiledFn encode = nullptr;
  Status got = GetEncodeTiled(&encode, name);
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

}  // namespace cakegrad::kernels::mhc_cuda
