// CUDA memory facts the daemon and the client both need, through the runtime's driver entry
// points so neither links libcuda directly (a binary without a driver still starts: CI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cakegrad/kernels/status.h"

namespace cakegrad::kernels {

// The allocation that contains device pointer `ptr`: its base address and size in bytes.
Status CudaAllocationRange(const void* ptr, uintptr_t* base, size_t* size);

// The UUID of CUDA device `ordinal` as nvidia-smi prints it ("GPU-xxxxxxxx-xxxx-..."): how the
// daemon and its clients name a GPU, since ordinals differ between containers.
Status CudaDeviceUuid(int ordinal, std::string* uuid);

// The text form of a 16-byte device UUID.
inline std::string FormatGpuUuid(const unsigned char b[16]) {
  char out[48];
  std::snprintf(out, sizeof(out),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return out;
}

}  // namespace cakegrad::kernels
