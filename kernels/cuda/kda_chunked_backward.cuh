// The chunked KDA backward (kda_chunked_backward.cu) and the sequential one (kda_backward.cu).
// KdaBackwardCuda routes by KdaBwdParams::algorithm; tests and bench call either directly.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cakegrad/kernels/kda.h"

namespace cakegrad::kernels::kda_cuda {

// Same contract as KdaBackwardCuda (kda.h): every gradient of SPEC section 3, bitwise
// deterministic, graph-capturable, workspace >= KdaBackwardWorkspaceBytes.
Status KdaBackwardChunkedCuda(const KdaBwdParams& p, cudaStream_t stream);

// The state-row slice width in which the chunked backward runs its checkpoint state pass and its
// reverse chain side by side for `chains` (document, head) pairs on `sms` SMs; 0 where it runs
// them one after the other instead, each in the forward's width (StatePassRows).
int ChunkedBackwardSideBySideRows(int64_t chains, int sms);

// The sequential backward (one CTA cluster per (document, head), FP32 recurrence), same contract.
Status KdaBackwardSequentialCuda(const KdaBwdParams& p, cudaStream_t stream);

}  // namespace cakegrad::kernels::kda_cuda
