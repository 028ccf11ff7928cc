// Shape-only workspace queries of the KDA CUDA kernels. Host code without CUDA, so the daemon's
// host build links them too.
#include "cakegrad/kernels/kda.h"
#include "kda_layout.h"

namespace cakegrad::kernels {

int64_t KdaForwardWorkspaceBytes(int64_t B, int64_t T, int64_t H, int64_t num_docs) {
  if (B < 0 || T < 0 || H < 1) return 0;
  return kda_layout::FwdWorkspaceBytes(B, T, H, num_docs);
}

int64_t KdaBackwardWorkspaceBytes(int64_t B, int64_t T, int64_t H, int64_t num_docs) {
  if (B < 0 || T < 0 || H < 1) return 0;
  // Either backward may serve the call (the daemon's --kda_backward), so the larger of the two.
  const int64_t sequential = kda_layout::MakeBwdLayout(B, T, H, num_docs).total;
  const int64_t chunked = kda_layout::MakeChunkBwdLayout(B, T, H, num_docs).total;
  return sequential > chunked ? sequential : chunked;
}

}  // namespace cakegrad::kernels
