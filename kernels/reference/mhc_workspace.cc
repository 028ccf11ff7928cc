// Shape-only workspace queries of the mHC CUDA kernels. Host code without CUDA, so the daemon's
// host build links them too.
#include "cakegrad/kernels/mhc.h"
#include "mhc_layout.h"

namespace cakegrad::kernels {

int64_t MhcForwardWorkspaceBytes(int64_t T, int64_t C) {
  if (!mhc_layout::ValidShape(T, C)) return 0;
  return mhc_layout::ForwardFnSplitBytes(C) + mhc_layout::ForwardPartialsBytes(T, C);
}

int64_t MhcBackwardPrepareWorkspaceBytes(int64_t T, int64_t C) {
  (void)T;
  (void)C;
  return 0;
}

int64_t MhcBackwardFinishWorkspaceBytes(int64_t T, int64_t C) {
  if (!mhc_layout::ValidShape(T, C)) return 0;
  return mhc_layout::BwdFinishRecordsBytes(T) + mhc_layout::BwdFinishPartialsBytes(T, C);
}

}  // namespace cakegrad::kernels
