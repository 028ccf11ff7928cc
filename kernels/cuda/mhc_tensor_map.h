// Tiled tensor maps for the mHC kernels' tensor copies (TMA), and the copies. The maps are
// encoded on the host with cuTensorMapEncodeTiled reached through the runtime's driver entry
// point, so the library does not link against libcuda, and travel as __grid_constant__ kernel
// parameters, so calls stay graph-capturable.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums

#include <cstdint>

#include "cakegrad/kernels/mhc.h"

namespace cakegrad::kernels::mhc_cuda {

// A tiled map of `rank` (<= 3) dims, innermost first, with boxes of `box`; `strides` are the
// rank - 1 outer strides in bytes. Elements past the tensor read as zero.
Status EncodeTiledMap(CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base,
                      const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                      CUtensorMapSwizzle swizzle, const char* name);

// Tensor copies global -> shared (sm_90), completion counted in bytes on `bar`.
__device__ __forceinline__ void TmaLoad2D(uint32_t dst, const CUtensorMap* map, int x, int y,
                                          uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void TmaLoad3D(uint32_t dst, const CUtensorMap* map, int x, int y, int z,
                                          uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(bar)
      : "memory");
}

}  // namespace cakegrad::kernels::mhc_cuda
