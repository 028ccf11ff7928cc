// Recurrent KDA forward and backward, K = V = 128: SPEC.md section 3, seed 004.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "cakegrad/kernels/kda.h"
#include "cakegrad/v1/kda.pb.h"
#include "ops/op_registry.h"

namespace cakegrad::server {
namespace {

namespace k = kernels;

// The CUDA kernels when this build has them, else UNIMPLEMENTED on the cuda backend.
#if defined(CAKEGRAD_CUDA_KDA)
#define KDA_CUDA(fn, p, ctx) k::fn(p, (ctx).stream)
constexpr bool kHasCuda = true;
#else
#define KDA_CUDA(fn, p, ctx) k::Unimplemented(#fn ": this build has no CUDA KDA kernels")
constexpr bool kHasCuda = false;
#endif

const std::vector<DType> kBf16 = {DType::kBF16};
const std::vector<DType> kFp32 = {DType::kFP32};
const std::vector<DType> kOffsets = {DType::kINT32, DType::kINT64};

using Dims = absl::flat_hash_map<std::string, int64_t>;

int64_t Get(const Dims& d, const char* symbol) {
  auto it = d.find(symbol);
  return it == d.end() ? 0 : it->second;
}

struct Options {
  double scale = k::kKdaDefaultScale;
  double lower_bound = k::kKdaDefaultLowerBound;
};

Options ReadOptions(const v1::KdaOptions& o) {
  Options out;
  if (o.has_scale()) out.scale = o.scale();
  if (o.has_lower_bound()) out.lower_bound = o.lower_bound();
  return out;
}

template <typename Request>
void CanonicalOptions(google::protobuf::Message* request) {
  v1::KdaOptions* o = static_cast<Request*>(request)->mutable_options();
  const Options e = ReadOptions(*o);
  o->set_scale(e.scale);
  o->set_lower_bound(e.lower_bound);
}

// Rules that tie arguments together: documents come from cu_seqlens (then B == 1) or are the
// batch rows (then every state has N == B rows).
template <typename Request>
absl::Status Check(const BoundCall& call) {
  const Options o = ReadOptions(call.as<Request>().options());
  const std::string& op = call.op->name;
  if (!(std::isfinite(o.scale) && o.scale > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": scale must be > 0, got ", o.scale));
  }
  if (!(o.lower_bound >= -5.0 && o.lower_bound < 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": lower_bound must be in [-5, 0), got ", o.lower_bound));
  }
  if (call.dim("H") < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": H (heads) must be >= 1"));
  }
  if (call.has("cu_seqlens")) {
    if (call.dim("B") != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": with cu_seqlens the batch dimension B must be 1, got ", call.dim("B")));
    }
  } else if (call.dims.contains("N") && call.dim("N") != call.dim("B")) {
    return absl::InvalidArgumentError(
        absl::StrCat(op,
                     ": without cu_seqlens the states hold one row per batch entry: N must "
                     "equal B = ",
                     call.dim("B"), ", got ", call.dim("N")));
  }
  return absl::OkStatus();
}

template <typename Params>
void SetCommon(const BoundCall& call, const v1::KdaOptions& proto, const LaunchContext& ctx,
               Params& p) {
  const Options o = ReadOptions(proto);
  p.q = call.ptr<const uint16_t>("q");
  p.k = call.ptr<const uint16_t>("k");
  p.v = call.ptr<const uint16_t>("v");
  p.g = call.ptr<const uint16_t>("g");
  p.beta = call.ptr<const uint16_t>("beta");
  p.A_log = call.ptr<const float>("a_log");
  p.dt_bias = call.ptr<const float>("dt_bias");
  p.initial_state = call.has("initial_state") ? call.ptr<const float>("initial_state") : nullptr;
  p.cu_seqlens = call.has("cu_seqlens") ? call.ptr<const void>("cu_seqlens") : nullptr;
  p.seqlens_dtype = call.has("cu_seqlens") ? call.tensor("cu_seqlens").dtype : DType::kINT64;
  p.workspace = ctx.workspace;
  p.workspace_bytes = ctx.workspace_bytes;
  p.B = call.dim("B");
  p.T = call.dim("T");
  p.H = call.dim("H");
  p.num_docs = call.has("cu_seqlens") ? call.dim("N") : call.dim("B");
  p.scale = static_cast<float>(o.scale);
  p.lower_bound = static_cast<float>(o.lower_bound);
  p.device_status = ctx.device_status;
}

k::Status LaunchForward(const BoundCall& call, const LaunchContext& ctx) {
  k::KdaFwdParams p;
  SetCommon(call, call.as<v1::KdaForwardRequest>().options(), ctx, p);
  p.o = call.ptr<uint16_t>("o");
  p.final_state = call.ptr<float>("final_state");
  if (ctx.cuda) return KDA_CUDA(KdaForwardCuda, p, ctx);
  return k::KdaForwardReference(p);
}

k::Status LaunchBackward(const BoundCall& call, const LaunchContext& ctx) {
  k::KdaBwdParams p;
  SetCommon(call, call.as<v1::KdaBackwardRequest>().options(), ctx, p);
  p.d_o = call.ptr<const uint16_t>("do");
  p.dfinal_state = call.has("dfinal_state") ? call.ptr<const float>("dfinal_state") : nullptr;
  p.dq = call.ptr<uint16_t>("dq");
  p.dk = call.ptr<uint16_t>("dk");
  p.dv = call.ptr<uint16_t>("dv");
  p.dg = call.ptr<uint16_t>("dg");
  p.dbeta = call.ptr<uint16_t>("dbeta");
  p.dA_log = call.ptr<float>("da_log");
  p.ddt_bias = call.ptr<float>("ddt_bias");
  p.dinitial_state = call.ptr<float>("dinitial_state");
  p.algorithm = ctx.choices.kda_backward;
  if (ctx.cuda) return KDA_CUDA(KdaBackwardCuda, p, ctx);
  return k::KdaBackwardReference(p);
}

}  // namespace

std::vector<OpSpec> KdaOps() {
  const Dim B = Sym("B"), T = Sym("T"), H = Sym("H"), N = Sym("N"), D = Lit(k::kKdaHeadDim);
  // The kernels access the 128-wide rows, the states, dt_bias and the workspace in 16-byte
  // pieces (kda_common.cuh, CheckAligned16): a misaligned one is refused here, on either backend.
  constexpr uint64_t kVec = kVecAlign;
  auto token = [&](const char* name, Role role) {
    return TensorSpec{name, role, kBf16, {B, T, H, D}, kVec};
  };
  auto state = [&](const char* name, Role role) {
    return TensorSpec{name, role, kFp32, {N, H, D, D}, kVec};
  };
  const std::vector<TensorSpec> inputs = {
      token("q", Role::kInput),
      token("k", Role::kInput),
      token("v", Role::kInput),
      token("g", Role::kInput),
      {"beta", Role::kInput, kBf16, {B, T, H}},
      {"a_log", Role::kInput, kFp32, {H}},
      {"dt_bias", Role::kInput, kFp32, {H, D}, kVec},
      // cu_seqlens before any state, so N is bound from the documents when they are packed.
      {"cu_seqlens", Role::kOptionalInput, kOffsets, {Sym("N", 1, 1)}},
      state("initial_state", Role::kOptionalInput),
  };
  OpSpec forward{"kda_forward",
                 inputs,
                 Check<v1::KdaForwardRequest>,
                 [](const Dims& d) {
                   return k::KdaForwardWorkspaceBytes(Get(d, "B"), Get(d, "T"), Get(d, "H"),
                                                      Get(d, "N"));
                 },
                 LaunchForward,
                 kHasCuda,
                 CanonicalOptions<v1::KdaForwardRequest>};
  forward.tensors.push_back({"workspace", Role::kWorkspace, {}, {}, kVec});
  forward.tensors.push_back(token("o", Role::kOutput));
  forward.tensors.push_back(state("final_state", Role::kOutput));

  OpSpec backward{"kda_backward",
                  inputs,
                  Check<v1::KdaBackwardRequest>,
                  [](const Dims& d) {
                    return k::KdaBackwardWorkspaceBytes(Get(d, "B"), Get(d, "T"), Get(d, "H"),
                                                        Get(d, "N"));
                  },
                  LaunchBackward,
                  kHasCuda,
                  CanonicalOptions<v1::KdaBackwardRequest>};
  for (TensorSpec t :
       {token("do", Role::kInput), state("dfinal_state", Role::kOptionalInput),
        TensorSpec{"workspace", Role::kWorkspace, {}, {}, kVec}, token("dq", Role::kOutput),
        token("dk", Role::kOutput), token("dv", Role::kOutput), token("dg", Role::kOutput),
        TensorSpec{"dbeta", Role::kOutput, kBf16, {B, T, H}},
        TensorSpec{"da_log", Role::kOutput, kFp32, {H}},
        TensorSpec{"ddt_bias", Role::kOutput, kFp32, {H, D}, kVec},
        state("dinitial_state", Role::kOutput)}) {
    backward.tensors.push_back(std::move(t));
  }
  return {forward, backward};
}

}  // namespace cakegrad::server
