// KDA forward entry point: checks the call and runs the chunked forward
// (kda_chunked_forward.cu). The sequential recurrence lives on only as the sequential backward's
// recompute pass (kda_row_pass.cu).
#include "kda_chunked_forward.cuh"
#include "kda_common.cuh"

namespace cakegrad::kernels {

Status KdaForwardCuda(const KdaFwdParams& p, cudaStream_t stream) {
  kda_cuda::FwdArgs a{};
  Status st = kda_cuda::MakeShape(p.B, p.T, p.H, p.num_docs, p.cu_seqlens, p.seqlens_dtype, p.scale,
                                  p.lower_bound, p.device_status, &a.s);
  if (!st.ok()) return st;
  if (a.s.total_tokens > 0 && (p.q == nullptr || p.k == nullptr || p.v == nullptr ||
                               p.g == nullptr || p.beta == nullptr || p.o == nullptr)) {
    return InvalidArgument("kda: q, k, v, g, beta and o are required");
  }
  if (p.A_log == nullptr || p.dt_bias == nullptr) {
    return InvalidArgument("kda: A_log and dt_bias are required");
  }
  const Status aligned = kda_cuda::CheckAligned16({{"q", p.q},
                                                   {"k", p.k},
                                                   {"v", p.v},
                                                   {"g", p.g},
                                                   {"o", p.o},
                                                   {"dt_bias", p.dt_bias},
                                                   {"initial_state", p.initial_state},
                                                   {"final_state", p.final_state},
                                                   {"workspace", p.workspace}});
  if (!aligned.ok()) return aligned;
  kda_cuda::SetFwdInputs(p, &a);
  a.o = p.o;
  a.final_state = p.final_state;
  return kda_cuda::LaunchChunkedForward(a, p.workspace, p.workspace_bytes, stream);
}

}  // namespace cakegrad::kernels
