// The chunked KDA forward (kda_chunked_forward.cu): the launch KdaForwardCuda routes to, and its
// two steps, which the chunked backward also enqueues apart.
#pragma once

#include <cstdint>

#include "kda_common.cuh"

namespace cakegrad::kernels::kda_cuda {

// Enqueues the chunked forward of every (document, head): a per-chunk preparation kernel that
// writes the chunk records into `workspace` (>= kda_layout::FwdWorkspaceBytes), then the state
// pass over chunks. Writes a.o and, when non-null, a.final_state.
Status LaunchChunkedForward(const FwdArgs& a, void* workspace, int64_t workspace_bytes,
                            cudaStream_t stream);

// The preparation alone (checks the workspace's size first).
Status LaunchChunkedPrep(const FwdArgs& a, void* workspace, int64_t workspace_bytes,
                         cudaStream_t stream);

// The state pass alone, in slices of `rows` (16, 32 or 64) state rows, over the records the
// preparation wrote to `workspace`. `dependent`: launched as a programmatic dependent of the
// kernel before it on the stream (pdl_launch.h; the chunked backward's reverse chain).
Status LaunchChunkedStatePass(const FwdArgs& a, const void* workspace, int rows,
                              cudaStream_t stream, bool dependent = false);

// The slice width LaunchChunkedForward takes for `chains` (document, head) pairs on `sms` SMs.
int StatePassRows(int64_t chains, int sms);

// The current device's SM count.
Status DeviceSmCount(int* sms);

}  // namespace cakegrad::kernels::kda_cuda
