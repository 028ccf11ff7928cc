// conv1d_forward and conv1d_backward: SPEC.md section 2, seed 002.
#include "absl/strings/str_cat.h"
#include "cakegrad/kernels/conv1d.h"
#include "cakegrad/v1/conv1d.pb.h"
#include "ops/op_registry.h"

namespace cakegrad::server {
namespace {

namespace k = kernels;

// The CUDA kernels when this build has them, else UNIMPLEMENTED on the cuda backend.
#if defined(CAKEGRAD_CUDA_CONV1D)
#define CONV1D_CUDA(fn, p, ctx) k::fn(p, (ctx).stream)
constexpr bool kHasCuda = true;
#else
#define CONV1D_CUDA(fn, p, ctx) k::Unimplemented(#fn ": this build has no CUDA conv1d kernels")
constexpr bool kHasCuda = false;
#endif

const std::vector<DType> kBf16 = {DType::kBF16};
const std::vector<DType> kParam = {DType::kFP32, DType::kBF16};
const std::vector<DType> kOffsets = {DType::kINT32, DType::kINT64};

absl::Status CheckChannels(const BoundCall& call) {
  if (call.dim("C") < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(call.op->name, ": C (channels) must be >= 1, got ", call.dim("C")));
  }
  return absl::OkStatus();
}

k::Status LaunchForward(const BoundCall& call, const LaunchContext& ctx) {
  k::Conv1dFwdParams p;
  p.x = call.ptr<const uint16_t>("x");
  p.weight = call.ptr<const void>("weight");
  p.weight_dtype = call.tensor("weight").dtype;
  p.bias = call.has("bias") ? call.ptr<const void>("bias") : nullptr;
  p.bias_dtype = call.tensor("bias").dtype;
  p.cu_seqlens = call.ptr<const void>("cu_seqlens");
  p.seqlens_dtype = call.tensor("cu_seqlens").dtype;
  p.y = call.ptr<uint16_t>("y");
  p.S = call.dim("S");
  p.C = call.dim("C");
  p.num_docs = call.dim("N");
  p.device_status = ctx.device_status;
  if (ctx.cuda) return CONV1D_CUDA(Conv1dForwardCuda, p, ctx);
  return k::Conv1dForwardReference(p);
}

k::Status LaunchBackward(const BoundCall& call, const LaunchContext& ctx) {
  const auto& req = call.as<v1::Conv1dBackwardRequest>();
  k::Conv1dBwdParams p;
  p.x = call.ptr<const uint16_t>("x");
  p.weight = call.ptr<const void>("weight");
  p.weight_dtype = call.tensor("weight").dtype;
  p.bias = call.has("bias") ? call.ptr<const void>("bias") : nullptr;
  p.bias_dtype = call.tensor("bias").dtype;
  p.cu_seqlens = call.ptr<const void>("cu_seqlens");
  p.seqlens_dtype = call.tensor("cu_seqlens").dtype;
  p.dy = call.ptr<const uint16_t>("dy");
  p.policy = req.silu_grad_preactivation() == v1::SILU_GRAD_PREACTIVATION_FP32
                 ? k::SiluGradPreactivation::kFP32
                 : k::SiluGradPreactivation::kBF16;
  p.dx = call.ptr<uint16_t>("dx");
  p.dweight = call.ptr<void>("dweight");
  p.dweight_dtype = call.tensor("dweight").dtype;
  p.dbias = call.has("dbias") ? call.ptr<void>("dbias") : nullptr;
  p.dbias_dtype = call.tensor("dbias").dtype;
  p.workspace = ctx.workspace;
  p.workspace_bytes = ctx.workspace_bytes;
  p.S = call.dim("S");
  p.C = call.dim("C");
  p.num_docs = call.dim("N");
  p.device_status = ctx.device_status;
  if (ctx.cuda) return CONV1D_CUDA(Conv1dBackwardCuda, p, ctx);
  return k::Conv1dBackwardReference(p);
}

}  // namespace

std::vector<OpSpec> Conv1dOps() {
  const Dim S = Sym("S"), C = Sym("C"), Np1 = Sym("N", 1, 1);
  OpSpec forward{
      "conv1d_forward",
      {
          {"x", Role::kInput, kBf16, {S, C}},
          {"weight", Role::kInput, kParam, {C, Lit(k::kConv1dWidth)}},
          {"cu_seqlens", Role::kInput, kOffsets, {Np1}},
          {"bias", Role::kOptionalInput, kParam, {C}},
          {"y", Role::kOutput, kBf16, {S, C}},
      },
      CheckChannels,
      nullptr,
      LaunchForward,
      kHasCuda,
      nullptr,  // no options
  };
  OpSpec backward{
      "conv1d_backward",
      {
          {"x", Role::kInput, kBf16, {S, C}},
          {"weight", Role::kInput, kParam, {C, Lit(k::kConv1dWidth)}},
          {"cu_seqlens", Role::kInput, kOffsets, {Np1}},
          {"dy", Role::kInput, kBf16, {S, C}},
          {"bias", Role::kOptionalInput, kParam, {C}},
          {"workspace", Role::kWorkspace, {}, {}},
          {"dx", Role::kOutput, kBf16, {S, C}},
          {"dweight", Role::kOutput, kParam, {C, Lit(k::kConv1dWidth)}},
          {"dbias", Role::kOptionalOutput, kParam, {C}},
      },
      [](const BoundCall& call) -> absl::Status {
        if (absl::Status s = CheckChannels(call); !s.ok()) return s;
        const auto& req = call.as<v1::Conv1dBackwardRequest>();
        if (!v1::SiluGradPreactivation_IsValid(req.silu_grad_preactivation())) {
          return absl::InvalidArgumentError(
              absl::StrCat("conv1d_backward: silu_grad_preactivation must be bf16 or fp32, got ",
                           req.silu_grad_preactivation()));
        }
        if (call.has("bias") != call.has("dbias")) {
          return absl::InvalidArgumentError(
              call.has("bias") ? "conv1d_backward: dbias is required when bias is given"
                               : "conv1d_backward: dbias was given but bias was not");
        }
        return absl::OkStatus();
      },
      [](const absl::flat_hash_map<std::string, int64_t>& dims) {
        return k::Conv1dBackwardWorkspaceBytes(dims.at("S"), dims.at("C"));
      },
      LaunchBackward,
      kHasCuda,
      // SILU_GRAD_PREACTIVATION_UNSPECIFIED means "bf16".
      [](google::protobuf::Message* request) {
        auto* r = static_cast<v1::Conv1dBackwardRequest*>(request);
        if (r->silu_grad_preactivation() == v1::SILU_GRAD_PREACTIVATION_UNSPECIFIED) {
          r->set_silu_grad_preactivation(v1::SILU_GRAD_PREACTIVATION_BF16);
        }
      },
  };
  return {forward, backward};
}

}  // namespace cakegrad::server
