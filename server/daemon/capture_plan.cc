#include "daemon/capture_plan.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cakegrad/v1/tensor.pb.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "launch/graph_key.h"
#include "ops/op_registry.h"
#include "ops/request_fields.h"
#include "spdlog/spdlog.h"

namespace cakegrad::server {
namespace {

namespace pb = google::protobuf;

constexpr uint64_t kAlignment = 256;
constexpr char kSession[] = "capture-at-start";
constexpr uint64_t kMaxBytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Text-format errors with the line and column a person can find (the parser counts from 0).
class Collector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

absl::Status Invalid(const CapturePlan& plan, int index, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(plan.source, ": request[", index, "]: ", what));
}

// The status of a check of request[index], its message prefixed with where it came from.
absl::Status InEntry(const CapturePlan& plan, int index, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(plan.source, ": request[", index, "]: ", s.message()));
}

// Places every tensor of request[index] at 256-byte aligned offsets; returns the bytes spanned.
// Sizes only: dtypes and shapes are judged by Bind, which names what it expected.
absl::StatusOr<uint64_t> LayOut(const CapturePlan& plan, int index, pb::Message* op_request) {
  uint64_t next = 0;
  absl::Status status;
  ForEachTensorRef(op_request, [&](const std::string& name, v1::TensorRef* ref) {
    if (!status.ok()) return;
    ref->set_region_id(0);
    ref->set_offset(next);
    uint64_t bytes = static_cast<uint64_t>(kernels::DTypeBytes(static_cast<DType>(ref->dtype())));
    for (int64_t d : ref->shape()) {
      if (d < 0) return;  // Bind names the negative dimension
      const uint64_t u = static_cast<uint64_t>(d);
      if (u != 0 && bytes > kMaxBytes / u) {
        status = Invalid(plan, index, absl::StrCat(name, " is too large"));
        return;
      }
      bytes *= u;
    }
    const uint64_t padded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (padded > kMaxBytes - next) {
      status = Invalid(plan, index, "its tensors are too large together");
      return;
    }
    next += padded;
  });
  RETURN_IF_ERROR(status);
  return next;
}

// "conv1d_backward C=4103 N=16 S=40000 (silu_grad_preactivation: ...)" for the start-up log.
std::string Summary(const BoundCall& call) {
  std::map<std::string, int64_t> dims(call.dims.begin(), call.dims.end());
  std::vector<std::string> parts = {call.op->name};
  for (const auto& [symbol, value] : dims) parts.push_back(absl::StrCat(symbol, "=", value));
  std::unique_ptr<pb::Message> options(call.request->New());
  options->CopyFrom(*call.request);
  std::vector<const pb::FieldDescriptor*> tensors;
  ForEachTensorRef(options.get(), [&](const std::string& name, v1::TensorRef*) {
    tensors.push_back(options->GetDescriptor()->FindFieldByName(name));
  });
  for (const pb::FieldDescriptor* f : tensors)
    options->GetReflection()->ClearField(options.get(), f);
  const std::string rest = options->ShortDebugString();
  if (!rest.empty()) parts.push_back(absl::StrCat("(", rest, ")"));
  return absl::StrJoin(parts, " ");
}

// Address space without memory behind it: lets the plan be bound (pointer arithmetic only, no
// access) on any machine, at start before the backend exists and in tests without a GPU.
class Reservation : public Mapping {
 public:
  Reservation(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  ~Reservation() override { munmap(base_, bytes_); }

 private:
  void* base_;
  size_t bytes_;
};

absl::StatusOr<MappedRange> Reserve(const CapturePlan& plan, uint64_t bytes) {
  const size_t length = static_cast<size_t>(std::max<uint64_t>(bytes, kAlignment));
  void* base = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return absl::InvalidArgumentError(absl::StrCat(plan.source, ": its largest request needs ",
                                                   bytes,
                                                   " bytes of tensors, more than this "
                                                   "machine can address (",
                                                   std::strerror(errno), ")"));
  }
  MappedRange range;
  range.base = static_cast<std::byte*>(base);
  range.size = bytes;
  range.mapping = std::make_shared<Reservation>(base, length);
  return range;
}

}  // namespace

absl::Status CheckCaptureOptions(const std::string& path, uint64_t cuda_graphs,
                                 const std::string& backend) {
  if (path.empty()) return absl::OkStatus();
  if (cuda_graphs == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--capture_at_start=", path,
        " needs --cuda_graphs > 0: the captured graphs are kept in that cache (one per shape)"));
  }
  if (backend == "host") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--capture_at_start=", path,
        " captures CUDA graphs, which --backend=host does not run: use --backend=cuda (or auto "
        "on a GPU machine), or drop --capture_at_start"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CapturePlan> ParseCapturePlan(const std::string& text, const std::string& source,
                                             uint64_t capacity) {
  CapturePlan plan;
  plan.source = source;
  v1::WarmupPlan file;
  Collector errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &file)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source,
        ": not a text-format cakegrad.v1.WarmupPlan (request { conv1d_backward { ... } }): ",
        errors.first().empty() ? "parse error" : errors.first()));
  }
  if (file.request_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": names no request { ... } to capture; drop the flag instead"));
  }
  if (static_cast<uint64_t>(file.request_size()) > capacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": names ", file.request_size(), " shapes, but --cuda_graphs=", capacity,
        " keeps only ", capacity, " graphs per GPU: raise --cuda_graphs to at least ",
        file.request_size(), " (and leave room for shapes not named here) or name fewer"));
  }
  for (int i = 0; i < file.request_size(); ++i) {
    CaptureEntry entry;
    entry.index = i;
    entry.request = file.request(i);
    entry.request.clear_session_id();
    entry.request.clear_completion();
    const pb::FieldDescriptor* field = OperatorField(entry.request);
    if (field == nullptr) {
      return Invalid(plan, i,
                     "names no operator (conv1d_backward { ... }, mhc_backward_finish "
                     "{ ... }, ...)");
    }
    entry.op = FindOp(field->name());
    if (entry.op == nullptr) {
      return Invalid(plan, i, absl::StrCat(field->name(), " is not implemented"));
    }
    ASSIGN_OR_RETURN(
        entry.scratch_bytes,
        LayOut(plan, i, entry.request.GetReflection()->MutableMessage(&entry.request, field)));
    plan.scratch_bytes = std::max(plan.scratch_bytes, entry.scratch_bytes);
    plan.entries.push_back(std::move(entry));
  }

  // The same validation as a client's request, against address space shaped like the scratch
  // memory each GPU will get; this also gives each entry's graph key and workspace.
  RegionRegistry regions(1);
  ASSIGN_OR_RETURN(MappedRange range, Reserve(plan, plan.scratch_bytes));
  ASSIGN_OR_RETURN(const uint64_t region,
                   regions.Add(kSession, "capture scratch", RegionKind::kHost, std::move(range)));
  BindOptions options;
  options.memory = RegionKind::kHost;
  options.needs_workspace = true;
  absl::flat_hash_map<std::string, int> keys;
  for (CaptureEntry& entry : plan.entries) {
    ASSIGN_OR_RETURN(BoundCapture bound,
                     BindCapture(plan, entry, regions, kSession, region, options));
    entry.summary = Summary(bound.call);
    auto [it, added] = keys.emplace(GraphKey(bound.call), entry.index);
    if (!added) {
      return Invalid(plan, entry.index,
                     absl::StrCat("names the same shape as request[", it->second,
                                  "] (one graph each); drop one"));
    }
    if (!bound.call.has("workspace") && entry.op->workspace_bytes) {
      plan.workspace_bytes =
          std::max(plan.workspace_bytes, entry.op->workspace_bytes(bound.call.dims));
    }
  }
  return plan;
}

absl::StatusOr<CapturePlan> LoadCapturePlan(const std::string& path, uint64_t capacity) {
  const std::string source = absl::StrCat("--capture_at_start=", path);
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(source, ": cannot read the file (", std::strerror(errno), ")"));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(source, ": read error"));
  return ParseCapturePlan(text.str(), source, capacity);
}

absl::StatusOr<BoundCapture> BindCapture(const CapturePlan& plan, const CaptureEntry& entry,
                                         const RegionRegistry& regions,
                                         const std::string& session_id, uint64_t region_id,
                                         const BindOptions& options) {
  BoundCapture bound;
  bound.request = std::make_unique<v1::RunRequest>(entry.request);
  const pb::FieldDescriptor* field = OperatorField(*bound.request);
  pb::Message* op_request =
      bound.request->GetReflection()->MutableMessage(bound.request.get(), field);
  ForEachTensorRef(op_request,
                   [&](const std::string&, v1::TensorRef* ref) { ref->set_region_id(region_id); });
  absl::StatusOr<BoundCall> call = Bind(*entry.op, *op_request, session_id, regions, options);
  if (!call.ok()) return InEntry(plan, entry.index, call.status());
  bound.call = *std::move(call);
  bound.call.session_id = session_id;
  return bound;
}

absl::Status CaptureAtStart(const CapturePlan& plan, Backend* backend, Metrics* metrics) {
  if (plan.entries.size() > backend->graph_cache_capacity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        plan.source, ": names ", plan.entries.size(), " shapes, but the ", backend->name(),
        " backend keeps ", backend->graph_cache_capacity(), " graphs per GPU (--cuda_graphs)"));
  }
  BindOptions options;
  options.memory = backend->memory();
  options.needs_workspace = true;
  for (int device = 0; device < backend->num_devices(); ++device) {
    // One scratch region per GPU holds any entry's tensors; it is freed once the last bound
    // call and this registry let go of it, before the next GPU's is allocated.
    absl::StatusOr<MappedRange> scratch = backend->AllocateScratch(device, plan.scratch_bytes);
    if (!scratch.ok()) {
      return absl::Status(scratch.status().code(),
                          absl::StrCat(plan.source, ": ", scratch.status().message()));
    }
    RegionRegistry regions(1);
    ASSIGN_OR_RETURN(const uint64_t region, regions.Add(kSession, "capture scratch",
                                                        backend->memory(), *std::move(scratch)));
    for (const CaptureEntry& entry : plan.entries) {
      if (options.memory == RegionKind::kCuda && !entry.op->has_cuda) {
        return Invalid(plan, entry.index,
                       absl::StrCat(entry.op->name, " has no CUDA kernel in this build"));
      }
      const absl::Time start = absl::Now();
      ASSIGN_OR_RETURN(BoundCapture bound,
                       BindCapture(plan, entry, regions, kSession, region, options));
      RETURN_IF_ERROR(InEntry(plan, entry.index, backend->PrepareGraph(bound.call)));
      spdlog::info("GPU {}: captured request[{}] {} in {:.1f} ms", device, entry.index,
                   entry.summary, absl::ToDoubleMilliseconds(absl::Now() - start));
      if (metrics != nullptr) metrics->RecordGraphPrepared(entry.op->name);
    }
  }
  return absl::OkStatus();
}

}  // namespace cakegrad::server
