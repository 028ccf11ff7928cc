// CUDA memory facts the daemon and the client both need, through the runtime's driver entry
// points so neither links libcuda directly (a binary without a driver still starts: CI).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cakegrad/kernels/status.h"

namespace cakegrad::kernels {

// The allocation that contains device pointer `ptr`: its base address and size in bytes.
Status CudaAllocationRange(const void* ptr, uintptr_t* base, size_t* size);

}  // namespace cakegrad::kernels
