// The one place where the kernel library's status becomes an absl::Status.
#pragma once

#include "absl/status/status.h"
#include "cakegrad/kernels/status.h"

namespace cakegrad::server {

absl::Status FromKernelStatus(const kernels::Status& s);

}  // namespace cakegrad::server
