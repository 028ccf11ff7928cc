// Randomized requests against the one validation path of every operator: valid requests
// mutated a few fields at a time (offsets near and past the end, overflowing sizes, negative
// and huge dimensions, wrong dtypes, other sessions' and unknown regions, strides, missing and
// extra tensors, workspaces of any size). Whatever a client sends, either Bind refuses it with a
// client error and a message, or every tensor it binds lies inside a region of the calling
// session with exactly its dtype's bytes, and no output overlaps another tensor: a kernel can
// then touch nothing outside the caller's own memory. Fresh seed per run, printed on failure.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cakegrad/v1/service.pb.h"
#include "ops/op_registry.h"
#include "ops/request_fields.h"
#include "server_test_util.h"
#include "validate/bind.h"

namespace cakegrad::server {
namespace {

struct Fuzzer {
  explicit Fuzzer(uint64_t seed) : rng(seed) {}

  uint64_t AddRegion(const std::string& session, size_t bytes) {
    const MappedRange range = test_support::OwnedHostRange(bytes);
    const uint64_t id = *registry.Add(session, "fuzz", RegionKind::kHost, range);
    ranges[id] = {session, range.base, bytes};
    return id;
  }

  int64_t Pick(std::initializer_list<int64_t> values) {
    const auto* p = values.begin();
    return p[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
  }
  bool Coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng); }

  // A request every operator accepts: each required tensor with its first dtype and its shape
  // at these symbol values, one after another (with gaps) in region `mine`.
  v1::RunRequest Valid(const OpSpec& op) {
    const absl::flat_hash_map<std::string, int64_t> dims = {{"S", 37}, {"C", 256}, {"T", 21},
                                                            {"H", 2},  {"B", 1},   {"N", 1}};
    v1::RunRequest run;
    const auto* field = v1::RunRequest::descriptor()->FindFieldByName(op.name);
    google::protobuf::Message* msg = run.GetReflection()->MutableMessage(&run, field);
    uint64_t offset = 0;
    for (const TensorSpec& spec : op.tensors) {
      if (spec.role != Role::kInput && spec.role != Role::kOutput) continue;
      const auto* f = msg->GetDescriptor()->FindFieldByName(spec.name);
      auto* ref = static_cast<v1::TensorRef*>(msg->GetReflection()->MutableMessage(msg, f));
      ref->set_region_id(mine);
      ref->set_dtype(static_cast<v1::DType>(spec.dtypes.front()));
      uint64_t n = 1;
      for (const Dim& d : spec.shape) {
        const int64_t v = d.symbol == nullptr ? d.add : d.mul * dims.at(d.symbol) + d.add;
        ref->add_shape(v);
        n *= static_cast<uint64_t>(v);
      }
      offset = (offset + 255) / 256 * 256;
      ref->set_offset(offset);
      offset += n * static_cast<uint64_t>(kernels::DTypeBytes(spec.dtypes.front())) + 64;
    }
    EXPECT_LE(offset, kRegionBytes) << op.name;
    return run;
  }

  void MutateRef(v1::TensorRef* ref) {
    switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
      case 0:
        ref->set_offset(static_cast<uint64_t>(
            Pick({0, 2, 255, kRegionBytes - 2, kRegionBytes, kRegionBytes + 64,
                  std::numeric_limits<int64_t>::max(), -1, -4096})));
        break;
      case 1:
        ref->set_offset(std::uniform_int_distribution<uint64_t>(0, kRegionBytes + 4096)(rng));
        break;
      case 2:
        if (ref->shape_size() > 0) {
          const int i = std::uniform_int_distribution<int>(0, ref->shape_size() - 1)(rng);
          ref->set_shape(
              i, Pick({0, 1, -1, 3, 37, 4096, int64_t{1} << 31, int64_t{1} << 40,
                       std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}));
        }
        break;
      case 3:
        if (Coin()) {
          ref->add_shape(Pick({1, 2, 0, -1}));
        } else if (ref->shape_size() > 0) {
          ref->mutable_shape()->RemoveLast();
        }
        break;
      case 4:
        ref->set_dtype(static_cast<v1::DType>(Pick({0, 1, 2, 3, 4, 5, 6, 99, -1})));
        break;
      case 5:
        ref->set_region_id(
            static_cast<uint64_t>(Pick({0, static_cast<int64_t>(mine), static_cast<int64_t>(small),
                                        static_cast<int64_t>(foreign), 9999, -1})));
        break;
      case 6:
        ref->clear_strides();
        for (int i = 0; i < ref->shape_size(); ++i) ref->add_strides(Pick({1, 0, -1, 16, 4096}));
        break;
      case 7: {  // the contiguous strides, spelled out: must be accepted like none
        ref->clear_strides();
        std::vector<int64_t> s(ref->shape_size(), 1);
        for (int i = ref->shape_size() - 2; i >= 0; --i) {
          // Past int64 (a fuzzed huge dimension) any value will do: Bind refuses the shape.
          if (__builtin_mul_overflow(s[i + 1], ref->shape(i + 1), &s[i])) {
            s[i] = std::numeric_limits<int64_t>::max();
          }
        }
        for (int64_t v : s) ref->add_strides(v);
        break;
      }
      case 8:  // move it onto another tensor's bytes
        ref->set_offset(Pick({0, 256, 512}));
        break;
      default:
        ref->set_region_id(small);
        ref->set_offset(Pick({0, 8, kSmallBytes - 8}));
        break;
    }
  }

  void Mutate(const OpSpec& op, google::protobuf::Message* msg) {
    const auto* desc = msg->GetDescriptor();
    const auto* refl = msg->GetReflection();
    const TensorSpec& spec =
        op.tensors[std::uniform_int_distribution<size_t>(0, op.tensors.size() - 1)(rng)];
    const auto* f = desc->FindFieldByName(spec.name);
    ASSERT_NE(f, nullptr) << op.name << "." << spec.name;
    switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
      case 0:
        refl->ClearField(msg, f);
        return;
      case 1: {  // an optional tensor or workspace, of some size, somewhere
        auto* ref = static_cast<v1::TensorRef*>(refl->MutableMessage(msg, f));
        ref->set_region_id(Coin(0.8) ? mine : small);
        ref->set_dtype(
            static_cast<v1::DType>(spec.dtypes.empty() ? DType::kUINT8 : spec.dtypes.back()));
        ref->clear_shape();
        if (spec.shape.empty()) {
          ref->add_shape(Pick({0, 1, 64, 4096, kRegionBytes, kRegionBytes * 4}));
        } else {
          for (size_t i = 0; i < spec.shape.size(); ++i) ref->add_shape(Pick({0, 1, 2, 3, 16}));
        }
        ref->set_offset(static_cast<uint64_t>(Pick({0, 1024, kRegionBytes - 4096})));
        return;
      }
      default:
        if (refl->HasField(*msg, f)) {
          MutateRef(static_cast<v1::TensorRef*>(refl->MutableMessage(msg, f)));
        }
        return;
    }
  }

  // What must hold of any call Bind accepts.
  void CheckBound(const OpSpec& op, google::protobuf::Message* msg, const BoundCall& call,
                  const std::string& request_text) {
    struct Span {
      std::string name;
      const std::byte* begin;
      uint64_t bytes;
      bool written;
    };
    std::vector<Span> spans;
    ForEachTensorRef(msg, [&](const std::string& name, v1::TensorRef* ref) {
      const BoundTensor& t = call.tensor(name);
      ASSERT_TRUE(t.present) << op.name << "." << name << " set but not bound\n" << request_text;
      const auto it = ranges.find(ref->region_id());
      ASSERT_NE(it, ranges.end()) << op.name << "." << name << " bound to an unknown region\n"
                                  << request_text;
      const Range& r = it->second;
      EXPECT_EQ(r.session, "me") << op.name << "." << name << " in another session's region\n"
                                 << request_text;
      uint64_t n = static_cast<uint64_t>(kernels::DTypeBytes(t.dtype));
      for (int64_t d : t.shape) {
        ASSERT_GE(d, 0) << op.name << "." << name << "\n" << request_text;
        n *= static_cast<uint64_t>(d);
      }
      EXPECT_EQ(n, t.bytes) << op.name << "." << name << "\n" << request_text;
      EXPECT_EQ(t.data, r.base + ref->offset()) << op.name << "." << name;
      EXPECT_GE(t.data, r.base) << op.name << "." << name << "\n" << request_text;
      EXPECT_LE(ref->offset(), r.size) << op.name << "." << name << "\n" << request_text;
      EXPECT_LE(t.bytes, r.size - std::min<uint64_t>(ref->offset(), r.size))
          << op.name << "." << name << " runs past its region\n"
          << request_text;
      bool written = false;
      for (const TensorSpec& s : op.tensors) {
        if (s.name == name) {
          written = s.role == Role::kOutput || s.role == Role::kOptionalOutput ||
                    s.role == Role::kWorkspace;
        }
      }
      spans.push_back({name, t.data, t.bytes, written});
    });
    for (size_t i = 0; i < spans.size(); ++i) {
      for (size_t j = 0; j < spans.size(); ++j) {
        const Span& a = spans[i];
        const Span& b = spans[j];
        if (i == j || !a.written || a.bytes == 0 || b.bytes == 0) continue;
        const bool overlap = a.begin < b.begin + b.bytes && b.begin < a.begin + a.bytes;
        EXPECT_FALSE(overlap) << op.name << ": output " << a.name << " overlaps " << b.name << "\n"
                              << request_text;
      }
    }
  }

  struct Range {
    std::string session;
    const std::byte* base;
    uint64_t size;
  };
  static constexpr int64_t kRegionBytes = 1 << 20;
  static constexpr int64_t kSmallBytes = 4096;
  std::mt19937_64 rng;
  RegionRegistry registry{64};
  absl::flat_hash_map<uint64_t, Range> ranges;
  uint64_t mine = AddRegion("me", kRegionBytes);
  uint64_t small = AddRegion("me", kSmallBytes);
  uint64_t foreign = AddRegion("someone-else", kRegionBytes);
};

TEST(BindFuzz, NoAcceptedCallReachesOutsideTheCallersRegions) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Fuzzer fz(seed);
  int accepted = 0, refused = 0;
  for (const OpSpec& op : AllOps()) {
    const v1::RunRequest valid = fz.Valid(op);
    const auto* field = v1::RunRequest::descriptor()->FindFieldByName(op.name);
    {
      auto call = Bind(op, valid.GetReflection()->GetMessage(valid, field), "me", fz.registry,
                       BindOptions{});
      ASSERT_TRUE(call.ok()) << op.name << ": the unmutated request must bind: " << call.status();
    }
    for (int iter = 0; iter < 3000; ++iter) {
      v1::RunRequest run = valid;
      google::protobuf::Message* msg = run.GetReflection()->MutableMessage(&run, field);
      const int mutations = std::uniform_int_distribution<int>(1, 3)(fz.rng);
      for (int m = 0; m < mutations; ++m) fz.Mutate(op, msg);
      BindOptions options;
      options.needs_workspace = fz.Coin();
      auto call = Bind(op, *msg, "me", fz.registry, options);
      if (!call.ok()) {
        ++refused;
        const absl::StatusCode code = call.status().code();
        EXPECT_TRUE(
            code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
            code == absl::StatusCode::kPermissionDenied ||
            code == absl::StatusCode::kFailedPrecondition ||
            code == absl::StatusCode::kResourceExhausted || code == absl::StatusCode::kOutOfRange)
            << op.name << ": " << call.status() << "\n"
            << msg->ShortDebugString();
        EXPECT_FALSE(call.status().message().empty()) << op.name;
        continue;
      }
      ++accepted;
      fz.CheckBound(op, msg, *call, msg->ShortDebugString());
      if (::testing::Test::HasFailure()) return;
    }
  }
  // Both outcomes must be exercised, or the test proves nothing.
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(refused, 1000);
  std::printf("seed %llu: %d accepted, %d refused\n", static_cast<unsigned long long>(seed),
              accepted, refused);
}

}  // namespace
}  // namespace cakegrad::server
