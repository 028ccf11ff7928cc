// A launch as a programmatic dependent (PDL) of the kernel before it on the stream: its blocks may
// be placed once every block of that kernel has triggered (cudaTriggerProgrammaticLaunchCompletion)
// or exited, and they read that kernel's results only after cudaGridDependencySynchronize. Stream
// order is kept and the launch is graph-capturable; the callers (conv1d's backward reduce, mHC's
// forward_stats coefficients and backward_finish's column kernel) use it to overlap a kernel's
// launch with the tail of the one it follows, and the chunked KDA backward to chain its reverse
// chain, state pass and grad kernel (whose CTAs wait on per-slot counters instead of
// cudaGridDependencySynchronize).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace cakegrad::kernels {

// `attr` must outlive the launch call (cudaLaunchKernelEx reads it then).
inline cudaLaunchConfig_t ProgrammaticLaunchConfig(dim3 grid, dim3 block, size_t smem,
                                                   cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr->val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

}  // namespace cakegrad::kernels
