// Tiled tensor maps for the mHC kernels' tensor copies (TMA), encoded on the host with
// cuTensorMapEncodeTiled reached through the runtime's driver entry point, so the library does not
// link against libcuda. The maps travel as __grid_constant__ kernel parameters, so calls stay
// graph-capturable.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums

#include "cakegrad/kernels/mhc.h"

namespace cakegrad::kernels::mhc_cuda {

// A tiled map of `rank` (<= 3) dims, innermost first, with boxes of `box`; `strides` are the
// rank - 1 outer strides in bytes. Elements past the tensor read as zero.
Status EncodeTiledMap(CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base,
                      const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                      CUtensorMapSwizzle swizzle, const char* name);

}  // namespace cakegrad::kernels::mhc_cuda
