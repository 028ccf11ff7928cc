// Builds without CUDA (-DCAKEGRAD_ENABLE_CUDA=OFF or no nvcc): the cuda backend is absent.
#include "launch/backend.h"

namespace cakegrad::server {

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions&) {
  return absl::UnavailableError("this cakegradd was built without CUDA: use --backend=host");
}

bool CudaDevicePresent() { return false; }

}  // namespace cakegrad::server
