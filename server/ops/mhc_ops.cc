// The five mHC training functions: SPEC.md section 1, seed 000.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "cakegrad/kernels/mhc.h"
#include "cakegrad/v1/mhc.pb.h"
#include "ops/op_registry.h"

namespace cakegrad::server {
namespace {

namespace k = kernels;

// The CUDA kernels when this build has them, else UNIMPLEMENTED on the cuda backend.
#if defined(CAKEGRAD_CUDA_MHC)
#define MHC_CUDA(fn, p, ctx) k::fn(p, (ctx).stream)
constexpr bool kHasCuda = true;
#else
#define MHC_CUDA(fn, p, ctx) k::Unimplemented(#fn ": this build has no CUDA mHC kernels")
constexpr bool kHasCuda = false;
#endif

const std::vector<DType> kBf16 = {DType::kBF16};
const std::vector<DType> kFp32 = {DType::kFP32};

struct Options {
  double rms_eps = 1e-5;
  double hc_eps = 1e-6;
  int32_t sinkhorn_iters = 20;
};

Options ReadOptions(const v1::MhcOptions& o) {
  Options out;
  if (o.has_rms_eps()) out.rms_eps = o.rms_eps();
  if (o.has_hc_eps()) out.hc_eps = o.hc_eps();
  if (o.has_sinkhorn_iters()) out.sinkhorn_iters = o.sinkhorn_iters();
  return out;
}

template <typename Request>
void CanonicalOptions(google::protobuf::Message* request) {
  v1::MhcOptions* o = static_cast<Request*>(request)->mutable_options();
  const Options e = ReadOptions(*o);
  o->set_rms_eps(e.rms_eps);
  o->set_hc_eps(e.hc_eps);
  o->set_sinkhorn_iters(e.sinkhorn_iters);
}

absl::Status CheckChannels(const BoundCall& call) {
  const int64_t C = call.dim("C");
  if (C < k::kMhcMinC || C > k::kMhcMaxC || C % k::kMhcCAlign != 0) {
    return absl::InvalidArgumentError(absl::StrCat(call.op->name, ": C must be a multiple of ",
                                                   k::kMhcCAlign, " in [", k::kMhcMinC, ", ",
                                                   k::kMhcMaxC, "], got ", C));
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const BoundCall& call, const v1::MhcOptions& proto) {
  const Options o = ReadOptions(proto);
  if (!(std::isfinite(o.rms_eps) && o.rms_eps > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(call.op->name, ": rms_eps must be finite and > 0, got ", o.rms_eps));
  }
  if (!(std::isfinite(o.hc_eps) && o.hc_eps >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(call.op->name, ": hc_eps must be finite and >= 0, got ", o.hc_eps));
  }
  if (o.sinkhorn_iters < 1 || o.sinkhorn_iters > k::kMhcMaxSinkhornIters) {
    return absl::InvalidArgumentError(
        absl::StrCat(call.op->name, ": sinkhorn_iters must be in [1, ", k::kMhcMaxSinkhornIters,
                     "], got ", o.sinkhorn_iters));
  }
  return CheckChannels(call);
}

template <typename Request>
absl::Status CheckWithOptions(const BoundCall& call) {
  return CheckOptions(call, call.as<Request>().options());
}

template <typename Params>
void SetForwardCommon(const BoundCall& call, const v1::MhcOptions& proto, const LaunchContext& ctx,
                      Params& p) {
  const Options o = ReadOptions(proto);
  p.X = call.ptr<const uint16_t>("x");
  p.fn = call.ptr<const float>("fn");
  p.scale = call.ptr<const float>("scale");
  p.base = call.ptr<const float>("base");
  p.stats = call.ptr<float>("stats");
  p.T = call.dim("T");
  p.C = call.dim("C");
  p.rms_eps = static_cast<float>(o.rms_eps);
  p.hc_eps = static_cast<float>(o.hc_eps);
  p.sinkhorn_iters = o.sinkhorn_iters;
  p.workspace = ctx.workspace;
  p.workspace_bytes = ctx.workspace_bytes;
}

k::Status LaunchForwardPrepare(const BoundCall& call, const LaunchContext& ctx) {
  k::MhcFwdPrepareParams p;
  SetForwardCommon(call, call.as<v1::MhcForwardPrepareRequest>().options(), ctx, p);
  p.U = call.ptr<uint16_t>("u");
  if (ctx.cuda) return MHC_CUDA(MhcForwardPrepareCuda, p, ctx);
  return k::MhcForwardPrepareReference(p);
}

k::Status LaunchForwardStats(const BoundCall& call, const LaunchContext& ctx) {
  k::MhcFwdStatsParams p;
  SetForwardCommon(call, call.as<v1::MhcForwardStatsRequest>().options(), ctx, p);
  if (ctx.cuda) return MHC_CUDA(MhcForwardStatsCuda, p, ctx);
  return k::MhcForwardStatsReference(p);
}

k::Status LaunchForwardFinish(const BoundCall& call, const LaunchContext& ctx) {
  k::MhcFwdFinishParams p;
  p.X = call.ptr<const uint16_t>("x");
  p.B = call.ptr<const uint16_t>("b");
  p.stats = call.ptr<const float>("stats");
  p.Y = call.ptr<uint16_t>("y");
  p.T = call.dim("T");
  p.C = call.dim("C");
  if (ctx.cuda) return MHC_CUDA(MhcForwardFinishCuda, p, ctx);
  return k::MhcForwardFinishReference(p);
}

k::Status LaunchBackwardPrepare(const BoundCall& call, const LaunchContext& ctx) {
  k::MhcBwdPrepareParams p;
  p.X = call.ptr<const uint16_t>("x");
  p.dY = call.ptr<const uint16_t>("dy");
  p.B = call.ptr<const uint16_t>("b");
  p.stats = call.ptr<const float>("stats");
  p.dB = call.ptr<uint16_t>("db");
  p.grad_stats = call.ptr<float>("grad_stats");
  p.T = call.dim("T");
  p.C = call.dim("C");
  if (ctx.cuda) return MHC_CUDA(MhcBackwardPrepareCuda, p, ctx);
  return k::MhcBackwardPrepareReference(p);
}

k::Status LaunchBackwardFinish(const BoundCall& call, const LaunchContext& ctx) {
  const auto& req = call.as<v1::MhcBackwardFinishRequest>();
  const Options o = ReadOptions(req.options());
  k::MhcBwdFinishParams p;
  p.X = call.ptr<const uint16_t>("x");
  p.dY = call.ptr<const uint16_t>("dy");
  p.dU = call.ptr<const uint16_t>("du");
  p.fn = call.ptr<const float>("fn");
  p.scale = call.ptr<const float>("scale");
  p.base = call.ptr<const float>("base");
  p.stats = call.ptr<const float>("stats");
  p.grad_stats = call.ptr<const float>("grad_stats");
  p.dX = call.ptr<uint16_t>("dx");
  p.dfn = call.ptr<float>("dfn");
  p.dscale = call.ptr<float>("dscale");
  p.dbase = call.ptr<float>("dbase");
  p.T = call.dim("T");
  p.C = call.dim("C");
  p.rms_eps = static_cast<float>(o.rms_eps);
  p.hc_eps = static_cast<float>(o.hc_eps);
  p.sinkhorn_iters = o.sinkhorn_iters;
  p.accumulate = req.accumulate();
  p.workspace = ctx.workspace;
  p.workspace_bytes = ctx.workspace_bytes;
  if (ctx.cuda) return MHC_CUDA(MhcBackwardFinishCuda, p, ctx);
  return k::MhcBackwardFinishReference(p);
}

using Dims = absl::flat_hash_map<std::string, int64_t>;

}  // namespace

std::vector<OpSpec> MhcOps() {
  const Dim T = Sym("T"), C = Sym("C"), C4 = Sym("C", 4), Four = Lit(k::kMhcStreams);
  // The tensors the CUDA kernels access in 16-byte pieces (mhc_common.cuh CheckVec, which refuses
  // them misaligned): asked of both backends here, so that a request the host backend takes is
  // one the cuda backend takes too. scale, base, their gradients and backward_finish's unread b
  // keep their dtype's alignment.
  constexpr uint64_t kVec = kVecAlign;
  const TensorSpec x{"x", Role::kInput, kBf16, {T, Four, C}, kVec};
  const TensorSpec fn{"fn", Role::kInput, kFp32, {Lit(k::kMhcLogits), C4}, kVec};
  const TensorSpec scale{"scale", Role::kInput, kFp32, {Lit(3)}};
  const TensorSpec base{"base", Role::kInput, kFp32, {Lit(k::kMhcLogits)}};
  const TensorSpec stats_in{"stats", Role::kInput, kFp32, {T, Lit(k::kMhcStatsWidth)}, kVec};
  const TensorSpec stats_out{"stats", Role::kOutput, kFp32, {T, Lit(k::kMhcStatsWidth)}, kVec};
  auto forward_ws = [](const Dims& d) { return k::MhcForwardWorkspaceBytes(d.at("T"), d.at("C")); };
  return {
      {"mhc_forward_prepare",
       {x, fn, scale, base, {"u", Role::kOutput, kBf16, {T, C}, kVec}, stats_out},
       CheckWithOptions<v1::MhcForwardPrepareRequest>,
       forward_ws,
       LaunchForwardPrepare,
       kHasCuda,
       CanonicalOptions<v1::MhcForwardPrepareRequest>},
      {"mhc_forward_stats",
       {x, fn, scale, base, stats_out},
       CheckWithOptions<v1::MhcForwardStatsRequest>,
       forward_ws,
       LaunchForwardStats,
       kHasCuda,
       CanonicalOptions<v1::MhcForwardStatsRequest>},
      {"mhc_forward_finish",
       {x,
        {"b", Role::kInput, kBf16, {T, C}, kVec},
        stats_in,
        {"y", Role::kOutput, kBf16, {T, Four, C}, kVec}},
       CheckChannels,
       nullptr,
       LaunchForwardFinish,
       kHasCuda,
       nullptr},
      {"mhc_backward_prepare",
       {x,
        {"dy", Role::kInput, kBf16, {T, Four, C}, kVec},
        {"b", Role::kInput, kBf16, {T, C}, kVec},
        stats_in,
        {"db", Role::kOutput, kBf16, {T, C}, kVec},
        {"grad_stats", Role::kOutput, kFp32, {T, Lit(k::kMhcGradStatsWidth)}, kVec}},
       CheckChannels,
       [](const Dims& d) { return k::MhcBackwardPrepareWorkspaceBytes(d.at("T"), d.at("C")); },
       LaunchBackwardPrepare,
       kHasCuda,
       nullptr},
      {"mhc_backward_finish",
       {x,
        {"dy", Role::kInput, kBf16, {T, Four, C}, kVec},
        {"du", Role::kInput, kBf16, {T, C}, kVec},
        {"b", Role::kOptionalInput, kBf16, {T, C}},
        fn,
        scale,
        base,
        stats_in,
        {"grad_stats", Role::kInput, kFp32, {T, Lit(k::kMhcGradStatsWidth)}, kVec},
        {"workspace", Role::kWorkspace, {}, {}, kVec},
        {"dx", Role::kOutput, kBf16, {T, Four, C}, kVec},
        {"dfn", Role::kOutput, kFp32, {Lit(k::kMhcLogits), C4}, kVec},
        {"dscale", Role::kOutput, kFp32, {Lit(3)}},
        {"dbase", Role::kOutput, kFp32, {Lit(k::kMhcLogits)}}},
       CheckWithOptions<v1::MhcBackwardFinishRequest>,
       [](const Dims& d) { return k::MhcBackwardFinishWorkspaceBytes(d.at("T"), d.at("C")); },
       LaunchBackwardFinish,
       kHasCuda,
       CanonicalOptions<v1::MhcBackwardFinishRequest>},
  };
}

}  // namespace cakegrad::server
