// Validation of operator requests: every rule, each with the code and a message naming the
// argument. No socket: requests are bound against an in-memory registry.
#include "validate/bind.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "cakegrad/kernels/conv1d.h"
#include "cakegrad/kernels/cuda_memory.h"
#include "cakegrad/v1/service.pb.h"
#include "ops/op_registry.h"
#include "server_test_util.h"

namespace cakegrad::server {
namespace {

using ::testing::HasSubstr;

class BindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    region_ = AddRegion("me", 1 << 20);
    foreign_ = AddRegion("someone-else", 1 << 20);
  }

  uint64_t AddRegion(const std::string& session, size_t bytes, int device = -1,
                     RegionKind kind = RegionKind::kHost) {
    return *registry_.Add(session, "test", kind,
                          test_support::OwnedHostRange(
                              bytes, device, device >= 0 ? "GPU-" + std::to_string(device) : ""));
  }

  // Tensors placed one after another in region_.
  v1::TensorRef Ref(v1::DType dtype, std::vector<int64_t> shape) {
    v1::TensorRef ref;
    ref.set_region_id(region_);
    ref.set_offset(next_offset_);
    ref.set_dtype(dtype);
    int64_t n = 1;
    for (int64_t d : shape) {
      ref.add_shape(d);
      n *= d;
    }
    const int64_t elem = dtype == v1::BF16    ? 2
                         : dtype == v1::INT64 ? 8
                         : dtype == v1::UINT8 ? 1
                                              : 4;
    next_offset_ += (n * elem + 255) / 256 * 256;
    return ref;
  }

  v1::Conv1dBackwardRequest ValidConv1dBackward(int64_t S = 100, int64_t C = 8, int64_t N = 3) {
    v1::Conv1dBackwardRequest r;
    *r.mutable_x() = Ref(v1::BF16, {S, C});
    *r.mutable_weight() = Ref(v1::FP32, {C, 4});
    *r.mutable_cu_seqlens() = Ref(v1::INT32, {N + 1});
    *r.mutable_dy() = Ref(v1::BF16, {S, C});
    *r.mutable_dx() = Ref(v1::BF16, {S, C});
    *r.mutable_dweight() = Ref(v1::FP32, {C, 4});
    return r;
  }

  absl::Status BindStatus(const std::string& op, const google::protobuf::Message& m,
                          bool cuda_workspace = false) {
    BindOptions options;
    options.needs_workspace = cuda_workspace;
    return Bind(*FindOp(op), m, "me", registry_, options).status();
  }

  RegionRegistry registry_{64};
  uint64_t region_ = 0;
  uint64_t foreign_ = 0;
  uint64_t next_offset_ = 0;
};

TEST_F(BindTest, ValidCallBindsSymbolsAndPointers) {
  auto r = ValidConv1dBackward(100, 8, 3);
  auto call = Bind(*FindOp("conv1d_backward"), r, "me", registry_, BindOptions{});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->dim("S"), 100);
  EXPECT_EQ(call->dim("C"), 8);
  EXPECT_EQ(call->dim("N"), 3);
  EXPECT_TRUE(call->has("x"));
  EXPECT_FALSE(call->has("bias"));
  EXPECT_EQ(call->pins.size(), 1u);
  EXPECT_EQ(call->tensor("dy").bytes, 100u * 8 * 2);
}

TEST_F(BindTest, EverySpecNamesRealProtoFields) {
  // An empty request must fail as "required", never as an internal spec error.
  const auto* oneof = v1::RunRequest::descriptor()->FindOneofByName("op");
  for (const OpSpec& op : AllOps()) {
    const auto* field = oneof->containing_type()->FindFieldByName(op.name);
    ASSERT_NE(field, nullptr) << op.name << " is not a RunRequest operator";
    v1::RunRequest run;
    const auto& empty = run.GetReflection()->GetMessage(run, field);
    absl::Status s = BindStatus(op.name, empty);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << op.name << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("is required")) << op.name;
  }
}

TEST_F(BindTest, MissingRequiredTensor) {
  auto r = ValidConv1dBackward();
  r.clear_dy();
  absl::Status s = BindStatus("conv1d_backward", r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dy is required"));
}

TEST_F(BindTest, WrongDtypeNamesExpectedAndReceived) {
  auto r = ValidConv1dBackward();
  r.mutable_x()->set_dtype(v1::FP32);
  absl::Status s = BindStatus("conv1d_backward", r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("x must be bfloat16, got float32"));
}

TEST_F(BindTest, WrongShapeNamesExpectedAndReceived) {
  auto r = ValidConv1dBackward(100, 8);
  *r.mutable_dy() = Ref(v1::BF16, {100, 9});
  absl::Status s = BindStatus("conv1d_backward", r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("dy must have shape [S, C] = [100, 8], got [100, 9]"));

  auto rank = ValidConv1dBackward();
  *rank.mutable_weight() = Ref(v1::FP32, {8, 4, 1});
  EXPECT_THAT(std::string(BindStatus("conv1d_backward", rank).message()),
              HasSubstr("weight must have shape [C, 4]"));

  auto width = ValidConv1dBackward();
  *width.mutable_weight() = Ref(v1::FP32, {8, 3});
  EXPECT_EQ(BindStatus("conv1d_backward", width).code(), absl::StatusCode::kInvalidArgument);

  auto negative = ValidConv1dBackward();
  negative.mutable_x()->set_shape(0, -5);
  EXPECT_THAT(std::string(BindStatus("conv1d_backward", negative).message()),
              HasSubstr("negative dimension"));
}

TEST_F(BindTest, NonContiguousStridesRejected) {
  auto r = ValidConv1dBackward(100, 8);
  r.mutable_x()->add_strides(1);
  r.mutable_x()->add_strides(100);
  absl::Status s = BindStatus("conv1d_backward", r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("x must be contiguous"));

  auto ok = ValidConv1dBackward(100, 8);
  ok.mutable_x()->add_strides(8);
  ok.mutable_x()->add_strides(1);
  EXPECT_TRUE(BindStatus("conv1d_backward", ok).ok());
}

// An empty tensor (B = 0) whose other dimensions' product passes 2^63: its contiguous strides do
// not fit in int64, so giving strides is refused as too large (computing them overflowed: UBSan,
// 2026-12-02), and the same shape without strides passes the check.
TEST_F(BindTest, StridesOfAnEmptyShapePast2To63AreRefusedWithoutOverflow) {
  v1::KdaForwardRequest r;
  for (v1::TensorRef* t : {r.mutable_q(), r.mutable_k(), r.mutable_v(), r.mutable_g()}) {
    *t = Ref(v1::BF16, {0, 5, 3, 128});
  }
  r.mutable_q()->set_shape(2, int64_t{1} << 61);
  for (int64_t v : {1, 1, 1, 1}) r.mutable_q()->add_strides(v);
  absl::Status s = BindStatus("kda_forward", r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("q is too large"));
}

TEST_F(BindTest, MisalignedOffsetRejected) {
  auto r = ValidConv1dBackward();
  r.mutable_weight()->set_offset(r.weight().offset() + 2);
  absl::Status s = BindStatus("conv1d_backward", r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("weight is misaligned"));
}

TEST_F(BindTest, OutOfBoundsAndOverflowRejected) {
  auto r = ValidConv1dBackward();
  r.mutable_dx()->set_offset((1 << 20) - 64);
  absl::Status s = BindStatus("conv1d_backward", r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dx lies outside region"));

  auto wrap = ValidConv1dBackward();
  wrap.mutable_dx()->set_offset(std::numeric_limits<uint64_t>::max() - 1);
  EXPECT_THAT(std::string(BindStatus("conv1d_backward", wrap).message()),
              HasSubstr("dx lies outside region"));

  // 2^62 elements of 2 bytes: the byte count itself would overflow.
  auto huge = ValidConv1dBackward();
  huge.mutable_x()->set_shape(0, int64_t{1} << 40);
  huge.mutable_x()->set_shape(1, int64_t{1} << 22);
  EXPECT_EQ(BindStatus("conv1d_backward", huge).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BindTest, ForeignAndUnknownRegions) {
  auto r = ValidConv1dBackward();
  r.mutable_dy()->set_region_id(foreign_);
  absl::Status s = BindStatus("conv1d_backward", r);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dy"));

  auto unknown = ValidConv1dBackward();
  unknown.mutable_dy()->set_region_id(999999);
  EXPECT_EQ(BindStatus("conv1d_backward", unknown).code(), absl::StatusCode::kNotFound);
}

TEST_F(BindTest, OutputOverlappingInputRejected) {
  auto r = ValidConv1dBackward();
  r.mutable_dx()->set_offset(r.x().offset());
  absl::Status s = BindStatus("conv1d_backward", r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("overlaps"));
}

TEST_F(BindTest, Conv1dRules) {
  auto r = ValidConv1dBackward();
  *r.mutable_bias() = Ref(v1::FP32, {8});
  EXPECT_THAT(std::string(BindStatus("conv1d_backward", r).message()),
              HasSubstr("dbias is required when bias is given"));
  *r.mutable_dbias() = Ref(v1::BF16, {8});
  EXPECT_TRUE(BindStatus("conv1d_backward", r).ok());

  auto policy = ValidConv1dBackward();
  policy.set_silu_grad_preactivation(static_cast<v1::SiluGradPreactivation>(7));
  EXPECT_THAT(std::string(BindStatus("conv1d_backward", policy).message()),
              HasSubstr("silu_grad_preactivation"));

  auto seqlens = ValidConv1dBackward();
  seqlens.mutable_cu_seqlens()->set_dtype(v1::FP32);
  EXPECT_THAT(std::string(BindStatus("conv1d_backward", seqlens).message()),
              HasSubstr("cu_seqlens must be int32 or int64"));
}

TEST_F(BindTest, WorkspaceTooSmallForCuda) {
  auto r = ValidConv1dBackward(100, 8);
  const int64_t need = kernels::Conv1dBackwardWorkspaceBytes(100, 8);
  *r.mutable_workspace() = Ref(v1::UINT8, {need > 0 ? need - 1 : 0});
  if (need > 0) {
    absl::Status s = BindStatus("conv1d_backward", r, /*cuda_workspace=*/true);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("workspace has"));
  }
  *r.mutable_workspace() = Ref(v1::UINT8, {need + 16});
  EXPECT_TRUE(BindStatus("conv1d_backward", r, true).ok());
}

TEST_F(BindTest, MhcRules) {
  v1::MhcForwardFinishRequest r;
  *r.mutable_x() = Ref(v1::BF16, {4, 4, 300});
  *r.mutable_b() = Ref(v1::BF16, {4, 300});
  *r.mutable_stats() = Ref(v1::FP32, {4, 64});
  *r.mutable_y() = Ref(v1::BF16, {4, 4, 300});
  EXPECT_THAT(std::string(BindStatus("mhc_forward_finish", r).message()),
              HasSubstr("C must be a multiple of 256"));

  v1::MhcForwardStatsRequest s;
  *s.mutable_x() = Ref(v1::BF16, {3, 4, 256});
  *s.mutable_fn() = Ref(v1::FP32, {24, 1024});
  *s.mutable_scale() = Ref(v1::FP32, {3});
  *s.mutable_base() = Ref(v1::FP32, {24});
  *s.mutable_stats() = Ref(v1::FP32, {3, 64});
  EXPECT_TRUE(BindStatus("mhc_forward_stats", s).ok());
  s.mutable_options()->set_sinkhorn_iters(65);
  EXPECT_THAT(std::string(BindStatus("mhc_forward_stats", s).message()),
              HasSubstr("sinkhorn_iters must be in [1, 64], got 65"));
  s.mutable_options()->set_sinkhorn_iters(0);
  EXPECT_EQ(BindStatus("mhc_forward_stats", s).code(), absl::StatusCode::kInvalidArgument);
  s.mutable_options()->clear_sinkhorn_iters();
  s.mutable_options()->set_rms_eps(-1);
  EXPECT_THAT(std::string(BindStatus("mhc_forward_stats", s).message()), HasSubstr("rms_eps"));
  s.mutable_options()->clear_rms_eps();
  *s.mutable_fn() = Ref(v1::FP32, {24, 256});
  EXPECT_THAT(std::string(BindStatus("mhc_forward_stats", s).message()),
              HasSubstr("fn must have shape [24, 4C] = [24, 1024], got [24, 256]"));

  // What the CUDA kernels access in 16-byte pieces is refused misaligned on either backend;
  // scale and base keep their dtype's alignment.
  *s.mutable_fn() = Ref(v1::FP32, {24, 1024});
  EXPECT_TRUE(BindStatus("mhc_forward_stats", s).ok()) << BindStatus("mhc_forward_stats", s);
  auto x_off = s;
  x_off.mutable_x()->set_offset(s.x().offset() + 2);
  EXPECT_THAT(std::string(BindStatus("mhc_forward_stats", x_off).message()),
              HasSubstr("x is misaligned: offset " + std::to_string(s.x().offset() + 2)));
  auto stats_off = s;
  stats_off.mutable_stats()->set_offset(s.stats().offset() + 8);
  EXPECT_THAT(std::string(BindStatus("mhc_forward_stats", stats_off).message()),
              HasSubstr("stats is misaligned"));
  auto scale_off = s;
  scale_off.mutable_scale()->set_offset(s.scale().offset() + 4);
  EXPECT_TRUE(BindStatus("mhc_forward_stats", scale_off).ok())
      << BindStatus("mhc_forward_stats", scale_off);
}

TEST_F(BindTest, KdaRules) {
  auto token = [&](int64_t B, int64_t T, int64_t H) { return Ref(v1::BF16, {B, T, H, 128}); };
  v1::KdaForwardRequest r;
  *r.mutable_q() = token(2, 5, 3);
  *r.mutable_k() = token(2, 5, 3);
  *r.mutable_v() = token(2, 5, 3);
  *r.mutable_g() = token(2, 5, 3);
  *r.mutable_beta() = Ref(v1::BF16, {2, 5, 3});
  *r.mutable_a_log() = Ref(v1::FP32, {3});
  *r.mutable_dt_bias() = Ref(v1::FP32, {3, 128});
  *r.mutable_o() = token(2, 5, 3);
  *r.mutable_final_state() = Ref(v1::FP32, {2, 3, 128, 128});
  EXPECT_TRUE(BindStatus("kda_forward", r).ok()) << BindStatus("kda_forward", r);

  auto wrong_n = r;
  *wrong_n.mutable_final_state() = Ref(v1::FP32, {3, 3, 128, 128});
  EXPECT_THAT(std::string(BindStatus("kda_forward", wrong_n).message()),
              HasSubstr("N must equal B = 2"));

  auto packed = r;
  *packed.mutable_cu_seqlens() = Ref(v1::INT64, {3});
  EXPECT_THAT(std::string(BindStatus("kda_forward", packed).message()), HasSubstr("B must be 1"));

  auto bound = r;
  bound.mutable_options()->set_lower_bound(0.0);
  EXPECT_THAT(std::string(BindStatus("kda_forward", bound).message()),
              HasSubstr("lower_bound must be in [-5, 0)"));
  bound.mutable_options()->set_lower_bound(-5.5);
  EXPECT_EQ(BindStatus("kda_forward", bound).code(), absl::StatusCode::kInvalidArgument);

  auto scale = r;
  scale.mutable_options()->set_scale(-1);
  EXPECT_THAT(std::string(BindStatus("kda_forward", scale).message()),
              HasSubstr("scale must be > 0"));

  auto head_dim = r;
  *head_dim.mutable_k() = Ref(v1::BF16, {2, 5, 3, 64});
  EXPECT_THAT(std::string(BindStatus("kda_forward", head_dim).message()),
              HasSubstr("k must have shape [B, T, H, 128]"));

  // The kernels access the 128-wide rows, the states, dt_bias and the workspace in 16-byte
  // pieces: an offset that suits the dtype but not those pieces is refused by name; beta keeps
  // its dtype's alignment.
  auto q_off = r;
  q_off.mutable_q()->set_offset(r.q().offset() + 2);
  absl::Status s = BindStatus("kda_forward", q_off);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("q is misaligned: offset " + std::to_string(r.q().offset() + 2)));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("multiple of 16 bytes (the kernels access it in pieces of that size)"));
  auto state_off = r;
  state_off.mutable_final_state()->set_offset(r.final_state().offset() + 4);
  EXPECT_THAT(std::string(BindStatus("kda_forward", state_off).message()),
              HasSubstr("final_state is misaligned"));
  auto ws = r;
  *ws.mutable_workspace() = Ref(v1::UINT8, {4096});
  EXPECT_TRUE(BindStatus("kda_forward", ws).ok()) << BindStatus("kda_forward", ws);
  ws.mutable_workspace()->set_offset(ws.workspace().offset() + 8);
  EXPECT_THAT(std::string(BindStatus("kda_forward", ws).message()),
              HasSubstr("workspace is misaligned"));
  auto beta_off = r;
  beta_off.mutable_beta()->set_offset(r.beta().offset() + 2);
  EXPECT_TRUE(BindStatus("kda_forward", beta_off).ok()) << BindStatus("kda_forward", beta_off);
  beta_off.mutable_beta()->set_offset(beta_off.beta().offset() + 1);
  EXPECT_THAT(std::string(BindStatus("kda_forward", beta_off).message()),
              HasSubstr("multiple of 2 bytes (bfloat16)"));
}

TEST_F(BindTest, CallRunsOnTheGpuOfItsTensorsAndNeverSpansTwo) {
  const uint64_t gpu0 = AddRegion("me", 1 << 20, 0, RegionKind::kCuda);
  const uint64_t gpu1 = AddRegion("me", 1 << 20, 1, RegionKind::kCuda);
  BindOptions cuda;
  cuda.memory = RegionKind::kCuda;
  auto r = ValidConv1dBackward();
  for (auto* ref : {r.mutable_x(), r.mutable_weight(), r.mutable_cu_seqlens(), r.mutable_dy(),
                    r.mutable_dx(), r.mutable_dweight()}) {
    ref->set_region_id(gpu1);
  }
  auto call = Bind(*FindOp("conv1d_backward"), r, "me", registry_, cuda);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->device, 1) << "routed to the GPU that holds the tensors";
  EXPECT_EQ(call->gpu_uuid, "GPU-1") << "the response names the GPU that ran the call";

  r.mutable_dy()->set_region_id(gpu0);
  absl::Status s = Bind(*FindOp("conv1d_backward"), r, "me", registry_, cuda).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dy is on GPU GPU-0 but x is on GPU GPU-1"));

  // Host memory on a cuda backend (and the reverse) is refused by kind.
  EXPECT_EQ(BindStatus("conv1d_backward", ValidConv1dBackward()).code(), absl::StatusCode::kOk);
  EXPECT_EQ(Bind(*FindOp("conv1d_backward"), ValidConv1dBackward(), "me", registry_, cuda)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(GpuUuid, FormattedAsNvidiaSmiPrintsIt) {
  const unsigned char bytes[16] = {0x2f, 0x9a, 0x01, 0xc4, 0x5e, 0x6d, 0x07, 0x18,
                                   0x9a, 0xbc, 0x00, 0x11, 0x22, 0x33, 0x44, 0xff};
  EXPECT_EQ(kernels::FormatGpuUuid(bytes), "GPU-2f9a01c4-5e6d-0718-9abc-0011223344ff");
}

TEST(RangeInside, OverflowSafe) {
  EXPECT_TRUE(RangeInside(0, 10, 10));
  EXPECT_TRUE(RangeInside(10, 0, 10));
  EXPECT_FALSE(RangeInside(11, 0, 10));
  EXPECT_FALSE(RangeInside(5, 6, 10));
  EXPECT_FALSE(RangeInside(std::numeric_limits<uint64_t>::max(), 2, 10));
  EXPECT_FALSE(RangeInside(2, std::numeric_limits<uint64_t>::max(), 10));
}

}  // namespace
}  // namespace cakegrad::server
