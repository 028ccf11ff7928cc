// The chunked KDA forward (kda_chunked_forward.cu): the launch KdaForwardCuda routes to.
#pragma once

#include <cstdint>

#include "kda_common.cuh"

namespace cakegrad::kernels::kda_cuda {

// Enqueues the chunked forward of every (document, head): a per-chunk preparation kernel that
// writes the chunk records into `workspace` (>= kda_layout::FwdWorkspaceBytes), then the state
// pass over chunks. Writes a.o and, when non-null, a.final_state.
Status LaunchChunkedForward(const FwdArgs& a, void* workspace, int64_t workspace_bytes,
                            cudaStream_t stream);

}  // namespace cakegrad::kernels::kda_cuda
