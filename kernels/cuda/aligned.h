// Whether a device pointer is a multiple of `bytes`: the launchers' test before they take (or
// refuse) a path with vector accesses, shared by the three families.
#pragma once

#include <cstdint>

namespace cakegrad::kernels {

inline bool Aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace cakegrad::kernels
