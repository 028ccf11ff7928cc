#include "common/kernel_status.h"

namespace cakegrad::server {

absl::Status FromKernelStatus(const kernels::Status& s) {
  switch (s.code()) {
    case kernels::StatusCode::kOk:
      return absl::OkStatus();
    case kernels::StatusCode::kInvalidArgument:
      return absl::InvalidArgumentError(s.message());
    case kernels::StatusCode::kUnimplemented:
      return absl::UnimplementedError(s.message());
    case kernels::StatusCode::kResourceExhausted:
      return absl::ResourceExhaustedError(s.message());
    case kernels::StatusCode::kInternal:
      break;
  }
  return absl::InternalError(s.message());
}

}  // namespace cakegrad::server
