#include "daemon/capture_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cakegrad/kernels/conv1d.h"
#include "launch/graph_key.h"
#include "ops/op_registry.h"

namespace cakegrad::server {
namespace {

using ::testing::HasSubstr;

// conv1d_backward at S = 4096, C = 1024, 4 documents, with bias. (Not an R"pb" string: the
// tests edit it line by line, and clang-format would reflow that.)
constexpr char kConv1d[] = R"txt(
request {
  conv1d_backward {
    x { dtype: BF16 shape: [4096, 1024] }
    weight { dtype: FP32 shape: [1024, 4] }
    cu_seqlens { dtype: INT64 shape: [5] }
    dy { dtype: BF16 shape: [4096, 1024] }
    bias { dtype: FP32 shape: [1024] }
    dx { dtype: BF16 shape: [4096, 1024] }
    dweight { dtype: FP32 shape: [1024, 4] }
    dbias { dtype: FP32 shape: [1024] }
  }
}
)txt";

// Two conv1d shapes and an mHC one.
std::string ThreeShapes() {
  return absl::StrCat(kConv1d, absl::StrReplaceAll(kConv1d, {{"4096", "512"}}), R"txt(
request {
  mhc_forward_finish {
    x { dtype: BF16 shape: [64, 4, 256] }
    b { dtype: BF16 shape: [64, 256] }
    stats { dtype: FP32 shape: [64, 64] }
    y { dtype: BF16 shape: [64, 4, 256] }
  }
}
)txt");
}

std::string Message(const absl::StatusOr<CapturePlan>& plan) {
  return std::string(plan.status().message());
}

TEST(CapturePlan, ParsesValidatesAndLaysOutAligned) {
  auto plan = ParseCapturePlan(kConv1d, "--capture_at_start=plan.txtpb", 8);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->entries.size(), 1u);
  const CaptureEntry& e = plan->entries[0];
  EXPECT_EQ(e.op, FindOp("conv1d_backward"));
  const auto& r = e.request.conv1d_backward();
  for (const v1::TensorRef* ref : {&r.x(), &r.weight(), &r.cu_seqlens(), &r.dy(), &r.bias(),
                                   &r.dx(), &r.dweight(), &r.dbias()}) {
    EXPECT_EQ(ref->offset() % 256, 0u) << ref->ShortDebugString();
  }
  EXPECT_EQ(r.dy().offset(), r.cu_seqlens().offset() + 256) << "placed one after the other";
  EXPECT_GE(e.scratch_bytes, 3ull * 4096 * 1024 * 2);
  EXPECT_EQ(plan->scratch_bytes, e.scratch_bytes);
  EXPECT_EQ(plan->workspace_bytes, kernels::Conv1dBackwardWorkspaceBytes(4096, 1024));
  EXPECT_THAT(e.summary, HasSubstr("conv1d_backward C=1024 N=4 S=4096"));
}

TEST(CapturePlan, SeveralOperatorsAndOptions) {
  std::string text = ThreeShapes();
  auto plan = ParseCapturePlan(text, "plan", 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->entries.size(), 3u);
  EXPECT_EQ(plan->entries[2].op->name, "mhc_forward_finish");
  EXPECT_EQ(plan->scratch_bytes, plan->entries[0].scratch_bytes) << "the largest entry's";
  // Another option is another shape to capture, not a duplicate.
  const std::string fp32 = absl::StrCat(
      kConv1d,
      absl::StrReplaceAll(
          kConv1d, {{"dx {", "silu_grad_preactivation: SILU_GRAD_PREACTIVATION_FP32 dx {"}}));
  auto two = ParseCapturePlan(fp32, "plan", 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_THAT(two->entries[1].summary, HasSubstr("SILU_GRAD_PREACTIVATION_FP32"));
}

// The shape captured at start and a client's request of that shape, in other regions and at
// other offsets, have the same graph key: the first real request is a cache hit.
TEST(CapturePlan, BoundEntryHasTheKeyOfAClientRequestOfThatShape) {
  auto plan =
      ParseCapturePlan(absl::StrReplaceAll(kConv1d, {{"4096", "64"}, {"1024", "32"}}), "plan", 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::byte> scratch(plan->scratch_bytes);
  RegionRegistry regions(4);
  MappedRange range;
  range.base = scratch.data();
  range.size = scratch.size();
  auto region = regions.Add("s", "scratch", RegionKind::kHost, range);
  ASSERT_TRUE(region.ok());
  auto bound = BindCapture(*plan, plan->entries[0], regions, "s", *region, BindOptions());
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(bound->call.tensor("x").data, scratch.data());
  EXPECT_EQ(bound->call.dim("S"), 64);

  v1::Conv1dBackwardRequest client = bound->request->conv1d_backward();
  uint64_t offset = 4;
  for (v1::TensorRef* ref :
       {client.mutable_x(), client.mutable_weight(), client.mutable_cu_seqlens(),
        client.mutable_dy(), client.mutable_bias(), client.mutable_dx(), client.mutable_dweight(),
        client.mutable_dbias()}) {
    ref->set_region_id(77);
    ref->set_offset(offset);
    offset += 1 << 20;
  }
  BoundCall call;
  call.op = FindOp("conv1d_backward");
  call.request = &client;
  EXPECT_EQ(GraphKey(bound->call), GraphKey(call));
}

TEST(CapturePlan, BadOperatorNamesTheEntry) {
  auto unknown = ParseCapturePlan("request { conv2d_backward {} }", "--capture_at_start=f", 4);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(unknown), HasSubstr("--capture_at_start=f"));
  EXPECT_THAT(Message(unknown), HasSubstr("line 1:"));
  EXPECT_THAT(Message(unknown), HasSubstr("conv2d_backward"));

  auto none = ParseCapturePlan(absl::StrCat(kConv1d, "request {}"), "--capture_at_start=f", 4);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(none), HasSubstr("--capture_at_start=f: request[1]: names no operator"));

  auto syntax = ParseCapturePlan("request { conv1d_backward { x { shape: [1, } } }", "f", 4);
  EXPECT_EQ(syntax.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(syntax), HasSubstr("line 1:"));
}

TEST(CapturePlan, BadShapeNamesTheEntryAndTheField) {
  const std::string two = absl::StrCat(kConv1d, kConv1d);
  struct Case {
    std::string text;
    const char* expected;
  } cases[] = {
      {absl::StrCat(kConv1d,
                    absl::StrReplaceAll(kConv1d, {{"dy { dtype: BF16 shape: [4096, 1024]",
                                                   "dy { dtype: BF16 shape: [4096, 1000]"}})),
       "request[1]: conv1d_backward: dy must have shape [S, C] = [4096, 1024], got [4096, 1000]"},
      {absl::StrReplaceAll(kConv1d, {{"x { dtype: BF16", "x { dtype: FP32"}}),
       "request[0]: conv1d_backward: x must be bfloat16, got float32"},
      {absl::StrReplaceAll(kConv1d, {{"[5]", "[-5]"}}),
       "request[0]: conv1d_backward: cu_seqlens has a negative dimension"},
      {absl::StrReplaceAll(kConv1d, {{"    dx { dtype: BF16 shape: [4096, 1024] }\n", ""}}),
       "request[0]: conv1d_backward: dx is required but was not given"},
      {absl::StrReplaceAll(kConv1d, {{"[4096, 1024]", "[4611686018427387904, 1024]"}}),
       "request[0]: x is too large"},
      {two, "request[1]: names the same shape as request[0]"},
  };
  for (const Case& c : cases) {
    auto plan = ParseCapturePlan(c.text, "--capture_at_start=f", 4);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(Message(plan), HasSubstr(absl::StrCat("--capture_at_start=f: ", c.expected)));
  }
}

TEST(CapturePlan, MissingOrEmptyFile) {
  auto missing = LoadCapturePlan("/nonexistent/cakegrad/plan.txtpb", 4);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(missing), HasSubstr("--capture_at_start=/nonexistent/cakegrad/plan.txtpb"));
  auto empty = ParseCapturePlan("# nothing\n", "--capture_at_start=f", 4);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(empty), HasSubstr("names no request"));
}

TEST(CapturePlan, MoreShapesThanTheCacheHoldsIsRefused) {
  auto plan = ParseCapturePlan(ThreeShapes(), "--capture_at_start=f", 2);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(plan), HasSubstr("names 3 shapes, but --cuda_graphs=2"));
}

TEST(CapturePlan, NeedsAGraphCacheAndTheCudaBackend) {
  EXPECT_TRUE(CheckCaptureOptions("", 0, "host").ok()) << "no plan, nothing to check";
  EXPECT_TRUE(CheckCaptureOptions("f", 8, "cuda").ok());
  EXPECT_TRUE(CheckCaptureOptions("f", 8, "auto").ok());
  const absl::Status no_cache = CheckCaptureOptions("f", 0, "cuda");
  EXPECT_EQ(no_cache.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_cache.message()), HasSubstr("needs --cuda_graphs > 0"));
  const absl::Status host = CheckCaptureOptions("f", 8, "host");
  EXPECT_EQ(host.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(host.message()), HasSubstr("--backend=host"));

  auto plan = ParseCapturePlan(kConv1d, "--capture_at_start=f", 8);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto backend = MakeHostBackend();
  const absl::Status captured = CaptureAtStart(*plan, backend.get(), nullptr);
  EXPECT_EQ(captured.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(captured.message()), HasSubstr("keeps 0 graphs per GPU"));
}

}  // namespace
}  // namespace cakegrad::server
