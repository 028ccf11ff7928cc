// A deliberately slow producer on a stream: the race an EVENT-mode daemon must not lose.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace cakegrad::testing {

// Spins for `milliseconds` on `stream`, then copies `bytes` from `src` to `dst` on it.
cudaError_t SlowCopy(void* dst, const void* src, size_t bytes, int milliseconds,
                     cudaStream_t stream);

}  // namespace cakegrad::testing
