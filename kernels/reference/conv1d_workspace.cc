// The workspace query lives with the references so host-only builds (no CUDA) link it; its size
// comes from the CUDA kernels' tiling, which is plain C++.
#include "cuda/conv1d_traits.h"
#include "cakegrad/kernels/conv1d.h"

namespace cakegrad::kernels {

int64_t Conv1dBackwardWorkspaceBytes(int64_t S, int64_t C) {
  return conv1d::BackwardWorkspaceBytes(S, C);
}

}  // namespace cakegrad::kernels
