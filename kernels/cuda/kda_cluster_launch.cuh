// The 2-CTA cluster launch shared by the chunked KDA forward's state pass and the chunked
// backward's reverse chain: both walk a (document, head)'s chunks in slices of state rows, and
// the two slices of a cluster share each chunk record's common operands by TMA multicast. Here:
// the tensor maps over the workspace's records, and the launch with its plain fallback.
#pragma once

#include <cuda.h>  // CUtensorMap (a kernel parameter: no libcuda link)

#include <cstdint>
#include <string>
#include <type_traits>

#include "kda_common.cuh"
#ifndef CAKEGRAD_KDA_HOST_EMU
#include "pdl_launch.h"
#include "per_device_memo.h"
#include "tensor_map.h"
#endif

namespace cakegrad::kernels::kda_cuda {

// Tiled maps over the workspace's records, dims (column, row, record): -W | Q Gam (128 columns,
// 4 x 64 rows), Kdec^T | M (64 columns, 2 x 128 + 2 x 64 rows); boxes 64 x 128 x 1 with the
// 128-byte swizzle (16 KB tiles: conflict-free ldmatrix rows without padding).
struct McMaps {
  CUtensorMap wq, kdm;
};
struct McNoMaps {};
template <bool kMc>
using McParam = std::conditional_t<kMc, McMaps, McNoMaps>;
// The maps of either parameter type (the plain instances compile the copies, never run them).
__device__ __forceinline__ const CUtensorMap* MapOf(const McMaps& m, int which) {
  return which == 0 ? &m.wq : &m.kdm;
}
__device__ __forceinline__ const CUtensorMap* MapOf(const McNoMaps&, int) { return nullptr; }
#ifdef CAKEGRAD_KDA_HOST_EMU
// The emulator runs blocks one after another, without clusters: its CTA issues its peer's
// copies too, so that the emulated pass checks every tile's coordinates.
constexpr bool kMcBothRanks = true;
#else
constexpr bool kMcBothRanks = false;

// Both maps of `records` records from the workspace's first record `ws` (16-byte aligned).
inline Status EncodeRecordMaps(McMaps* maps, const char* ws, int64_t records) {
  auto encode = [&](CUtensorMap* map, int64_t offset, int64_t cols, int64_t rows) {
    const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                                static_cast<cuuint64_t>(records)};
    const cuuint64_t strides[2] = {static_cast<cuuint64_t>(cols * 2),
                                   static_cast<cuuint64_t>(kda_layout::kRecBytes)};
    const cuuint32_t box[3] = {64, 128, 1};
    return EncodeTiledMap(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, ws + offset, dims, strides, box,
                          CU_TENSOR_MAP_SWIZZLE_128B, "kda: the chunk records' tensor map");
  };
  constexpr int64_t kC = kda_layout::kChunk;
  const Status wq = encode(&maps->wq, kda_layout::kRecNegW, kDim, 4 * kC);
  if (!wq.ok()) return wq;
  return encode(&maps->kdm, kda_layout::kRecKdecT, kC, 2 * kDim + 2 * kC);
}

// The clusters of `kernel` resident at once on the current device under `cfg` (its cluster shape
// from cfg's attributes or the kernel's __cluster_dims__), asked once per device through
// `resident`.
template <class Kernel>
Status ResidentClusters(Kernel kernel, const cudaLaunchConfig_t& cfg, PerDeviceMemo* resident,
                        const char* what, int* clusters) {
  int dev = 0;
  const cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) {
    return Internal(std::string("kda: cudaGetDevice: ") + cudaGetErrorString(err));
  }
  return resident->Get(
      dev,
      [&](int* n) {
        const cudaError_t e = cudaOccupancyMaxActiveClusters(n, kernel, &cfg);
        if (e == cudaSuccess) return OkStatus();
        return Internal(std::string("kda: cudaOccupancyMaxActiveClusters (") + what +
                        "): " + cudaGetErrorString(e));
      },
      clusters);
}

// Launches kernel<<<grid, threads, smem, stream>>>(args...) as clusters of two CTAs along x and
// sets *launched; leaves *launched false, launching nothing, where the device cannot hold one
// such cluster (cudaOccupancyMaxActiveClusters, asked once per device through `resident`), so
// that the caller launches its plain instance instead. `dependent`: as a programmatic dependent
// of the kernel before it on the stream (pdl_launch.h).
template <class Kernel, class... Args>
Status LaunchClusterPair(Kernel kernel, dim3 grid, int threads, int smem, cudaStream_t stream,
                         bool dependent, PerDeviceMemo* resident, const char* what, bool* launched,
                         const Args&... args) {
  *launched = false;
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t cfg = ProgrammaticLaunchConfig(grid, dim3(threads), smem, stream, &attr[1]);
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;  // the cluster shape, then (dependent) the programmatic serialization
  cfg.numAttrs = dependent ? 2 : 1;
  int clusters = 0;
  const Status queried = ResidentClusters(kernel, cfg, resident, what, &clusters);
  if (!queried.ok() || clusters < 1) return queried;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, args...);
  if (err != cudaSuccess) {
    return Internal(std::string("kda: launching ") + what +
                    " (2-CTA clusters): " + cudaGetErrorString(err));
  }
  *launched = true;
  return CheckLaunch(what);
}
#endif

}  // namespace cakegrad::kernels::kda_cuda
