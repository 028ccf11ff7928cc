// Sizes the per-device workspace the daemon allocates at start from the largest shapes it is
// configured to serve, so a request within them never waits on (or fails) an allocation.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace cakegrad::server {

// `plan` lists operators and their largest sizes: "conv1d_backward:S=1048576,C=12288;
// mhc_backward_finish:T=65536,C=4096;kda_backward:B=1,T=65536,H=32,N=64" (symbols as in
// GetWorkspaceSize: S/T tokens, C channels, H heads, B batch, N documents; unlisted ones are
// 0). Returns the largest workspace any operator of a listed operator's family (conv1d, mhc,
// kda: the forward and backward of one training step) needs at those sizes; INVALID_ARGUMENT
// names a bad entry.
absl::StatusOr<int64_t> WorkspaceBytesForPlan(const std::string& plan);

}  // namespace cakegrad::server
