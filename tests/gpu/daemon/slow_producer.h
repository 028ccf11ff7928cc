// A deliberately slow producer on a stream: the race an EVENT-mode daemon must not lose (the
// GPU daemon tests), and a trainer whose host runs ahead of its GPU (bench/e2e/daemon_bench).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace cakegrad::testing {

// Keeps `stream` busy for `microseconds` (one thread spinning on the global timer).
cudaError_t SpinOnStream(cudaStream_t stream, int microseconds);

// Spins for `milliseconds` on `stream`, then copies `bytes` from `src` to `dst` on it.
cudaError_t SlowCopy(void* dst, const void* src, size_t bytes, int milliseconds,
                     cudaStream_t stream);

}  // namespace cakegrad::testing
