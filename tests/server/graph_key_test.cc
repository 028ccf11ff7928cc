#include "launch/graph_key.h"

#include <gtest/gtest.h>

#include "cakegrad/v1/conv1d.pb.h"
#include "cakegrad/v1/kda.pb.h"
#include "cakegrad/v1/mhc.pb.h"
#include "ops/op_registry.h"
#include "server_test_util.h"

namespace cakegrad::server {
namespace {

using test_support::Ref;

v1::Conv1dBackwardRequest Request(uint64_t region, uint64_t base, int64_t S, int64_t C) {
  v1::Conv1dBackwardRequest r;
  *r.mutable_x() = Ref(region, base, v1::BF16, {S, C});
  *r.mutable_weight() = Ref(region, base + 1024, v1::FP32, {C, 4});
  *r.mutable_cu_seqlens() = Ref(region, base + 2048, v1::INT32, {3});
  *r.mutable_dy() = Ref(region, base + 4096, v1::BF16, {S, C});
  *r.mutable_dx() = Ref(region, base + 8192, v1::BF16, {S, C});
  *r.mutable_dweight() = Ref(region, base + 16384, v1::FP32, {C, 4});
  return r;
}

std::string Key(const google::protobuf::Message& m, const char* op = "conv1d_backward") {
  BoundCall call;
  call.op = FindOp(op);
  call.request = &m;
  return GraphKey(call);
}

TEST(GraphKey, PointersDoNotMatterShapesAndOptionsDo) {
  const auto a = Request(1, 0, 100, 8);
  const auto moved = Request(7, 1 << 20, 100, 8);
  EXPECT_EQ(Key(a), Key(moved)) << "a replay takes new regions and offsets";
  EXPECT_NE(Key(a), Key(Request(1, 0, 101, 8)));
  EXPECT_NE(Key(a), Key(Request(1, 0, 100, 16)));
  auto fp32 = a;
  fp32.set_silu_grad_preactivation(v1::SILU_GRAD_PREACTIVATION_FP32);
  EXPECT_NE(Key(a), Key(fp32)) << "the route is part of the key";
  auto with_bias = a;
  *with_bias.mutable_bias() = Ref(1, 1 << 19, v1::FP32, {8});
  EXPECT_NE(Key(a), Key(with_bias));
  auto bf16_weight = a;
  bf16_weight.mutable_weight()->set_dtype(v1::BF16);
  EXPECT_NE(Key(a), Key(bf16_weight));
}

// A default spelled out and a default left unset run the same program: one key (a graph captured
// at start from a plan that spells the options serves clients that do not, and the reverse).
TEST(GraphKey, AnOptionLeftUnsetIsItsDefault) {
  const auto unset = Request(1, 0, 100, 8);
  auto bf16 = unset;
  bf16.set_silu_grad_preactivation(v1::SILU_GRAD_PREACTIVATION_BF16);
  EXPECT_EQ(Key(unset), Key(bf16));

  v1::MhcBackwardFinishRequest mhc;
  *mhc.mutable_x() = Ref(1, 0, v1::BF16, {16, 4, 256});
  auto mhc_explicit = mhc;
  mhc_explicit.mutable_options()->set_rms_eps(1e-5);
  mhc_explicit.mutable_options()->set_hc_eps(1e-6);
  mhc_explicit.mutable_options()->set_sinkhorn_iters(20);
  EXPECT_EQ(Key(mhc, "mhc_backward_finish"), Key(mhc_explicit, "mhc_backward_finish"));
  auto mhc_other = mhc_explicit;
  mhc_other.mutable_options()->set_sinkhorn_iters(21);
  EXPECT_NE(Key(mhc, "mhc_backward_finish"), Key(mhc_other, "mhc_backward_finish"));
  EXPECT_EQ(mhc.options().has_rms_eps(), false) << "the caller's request is not modified";

  v1::KdaForwardRequest kda;
  *kda.mutable_q() = Ref(1, 0, v1::BF16, {1, 64, 2, 128});
  auto kda_explicit = kda;
  kda_explicit.mutable_options()->set_lower_bound(-5.0);
  EXPECT_EQ(Key(kda, "kda_forward"), Key(kda_explicit, "kda_forward"));
  kda_explicit.mutable_options()->set_scale(0.5);
  EXPECT_NE(Key(kda, "kda_forward"), Key(kda_explicit, "kda_forward"));
}

}  // namespace
}  // namespace cakegrad::server
