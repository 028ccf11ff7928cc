// A kernel that keeps a stream busy for a while: the benchmark's stand-in for a trainer whose
// host runs ahead of its GPU work.
#pragma once

#include <cuda_runtime.h>

namespace cakegrad::bench {

cudaError_t SpinOnStream(cudaStream_t stream, int microseconds);

}  // namespace cakegrad::bench
