#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "cakegrad/kernels/cuda_memory.h"

namespace cakegrad::kernels {
namespace {

using GetAddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

}  // namespace

Status CudaAllocationRange(const void* ptr, uintptr_t* base, size_t* size) {
  static GetAddressRangeFn get_range = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<GetAddressRangeFn>(nullptr);
    }
    return reinterpret_cast<GetAddressRangeFn>(fn);
  }();
  if (get_range == nullptr) return Internal("the CUDA driver has no cuMemGetAddressRange");
  CUdeviceptr b = 0;
  size_t s = 0;
  const CUresult r = get_range(&b, &s, reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS) {
    return InvalidArgument("pointer is not inside a CUDA allocation (cuMemGetAddressRange error " +
                           std::to_string(static_cast<int>(r)) + ")");
  }
  *base = static_cast<uintptr_t>(b);
  *size = s;
  return OkStatus();
}

Status CudaDeviceUuid(int ordinal, std::string* uuid) {
  cudaDeviceProp prop;
  if (cudaError_t e = cudaGetDeviceProperties(&prop, ordinal); e != cudaSuccess) {
    return Internal(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e));
  }
  *uuid = FormatGpuUuid(reinterpret_cast<const unsigned char*>(prop.uuid.bytes));
  return OkStatus();
}

}  // namespace cakegrad::kernels
