#include "validate/bind.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cakegrad/v1/tensor.pb.h"
#include "common/status_macros.h"

namespace cakegrad::server {
namespace {

namespace pb = google::protobuf;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string RuleString(const std::vector<Dim>& rule) {
  std::vector<std::string> parts;
  for (const Dim& d : rule) {
    if (d.symbol == nullptr) {
      parts.push_back(absl::StrCat(d.add));
    } else {
      std::string s = d.mul == 1 ? d.symbol : absl::StrCat(d.mul, d.symbol);
      if (d.add != 0) absl::StrAppend(&s, d.add > 0 ? " + " : " - ", d.add > 0 ? d.add : -d.add);
      parts.push_back(s);
    }
  }
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

std::string DTypeList(const std::vector<DType>& dtypes) {
  std::vector<std::string> names;
  for (DType t : dtypes) names.push_back(kernels::DTypeName(t));
  return absl::StrJoin(names, " or ");
}

absl::Status Invalid(const OpSpec& op, const std::string& arg, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(op.name, ": ", arg, " ", what));
}

// Checks `shape` against `rule`, binding unbound symbols from it.
absl::Status MatchShape(const OpSpec& op, const TensorSpec& spec, const std::vector<int64_t>& shape,
                        absl::flat_hash_map<std::string, int64_t>& dims) {
  auto expected = [&] {
    std::vector<std::string> parts;
    for (const Dim& d : spec.shape) {
      if (d.symbol != nullptr && dims.contains(d.symbol)) {
        parts.push_back(absl::StrCat(d.mul * dims.at(d.symbol) + d.add));
      } else if (d.symbol == nullptr) {
        parts.push_back(absl::StrCat(d.add));
      } else {
        parts.push_back("?");
      }
    }
    return absl::StrCat(RuleString(spec.shape), " = [", absl::StrJoin(parts, ", "), "]");
  };
  if (shape.size() != spec.shape.size()) {
    return Invalid(op, spec.name,
                   absl::StrCat("must have shape ", expected(), ", got ", ShapeString(shape)));
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    const Dim& d = spec.shape[i];
    const int64_t got = shape[i];
    if (got < 0) {
      return Invalid(op, spec.name, absl::StrCat("has a negative dimension: ", ShapeString(shape)));
    }
    if (d.symbol == nullptr) {
      if (got != d.add) {
        return Invalid(op, spec.name,
                       absl::StrCat("must have shape ", expected(), ", got ", ShapeString(shape)));
      }
      continue;
    }
    auto it = dims.find(d.symbol);
    if (it == dims.end()) {
      const int64_t scaled = got - d.add;
      if (scaled < 0 || scaled % d.mul != 0) {
        return Invalid(
            op, spec.name,
            absl::StrCat("must have shape ", RuleString(spec.shape), ", got ", ShapeString(shape)));
      }
      dims[d.symbol] = scaled / d.mul;
    } else if (got != d.mul * it->second + d.add) {
      return Invalid(op, spec.name,
                     absl::StrCat("must have shape ", expected(), ", got ", ShapeString(shape)));
    }
  }
  return absl::OkStatus();
}

// Element count times element size, or an error if it does not fit in 63 bits.
absl::StatusOr<uint64_t> ByteSize(const OpSpec& op, const std::string& arg,
                                  const std::vector<int64_t>& shape, DType dtype) {
  uint64_t bytes = static_cast<uint64_t>(kernels::DTypeBytes(dtype));
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (int64_t d : shape) {
    const uint64_t u = static_cast<uint64_t>(d);
    if (u != 0 && bytes > kMax / u) {
      return Invalid(op, arg, absl::StrCat("is too large: ", ShapeString(shape)));
    }
    bytes *= u;
  }
  return bytes;
}

// Row-major strides of `shape`, or nullopt where one does not fit in int64 (a shape so large
// that ByteSize refuses it, or an empty one with a dimension past 2^63 / the others' product).
std::optional<std::vector<int64_t>> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    if (__builtin_mul_overflow(strides[i + 1], shape[i + 1], &strides[i])) return std::nullopt;
  }
  return strides;
}

struct Placed {
  const Region* region;
  uint64_t offset;
  uint64_t bytes;
  bool output;
};

}  // namespace

bool RangeInside(uint64_t offset, uint64_t bytes, uint64_t size) {
  return offset <= size && bytes <= size - offset;
}

absl::StatusOr<BoundCall> Bind(const OpSpec& op, const pb::Message& request,
                               const std::string& session_id, const RegionRegistry& regions,
                               const BindOptions& options) {
  BoundCall call;
  call.op = &op;
  call.request = &request;
  const pb::Descriptor* desc = request.GetDescriptor();
  const pb::Reflection* refl = request.GetReflection();
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Region>> pinned;
  std::vector<std::pair<std::string, Placed>> placed;
  const TensorSpec* first_tensor = nullptr;
  const Region* first_region = nullptr;

  for (const TensorSpec& spec : op.tensors) {
    const pb::FieldDescriptor* field = desc->FindFieldByName(spec.name);
    if (field == nullptr || field->message_type() != v1::TensorRef::descriptor()) {
      return absl::InternalError(absl::StrCat(op.name, ": spec names unknown tensor ", spec.name));
    }
    BoundTensor& bound = call.tensors[spec.name];
    if (!refl->HasField(request, field)) {
      if (spec.role == Role::kInput || spec.role == Role::kOutput) {
        return Invalid(op, spec.name, "is required but was not given");
      }
      continue;
    }
    const auto& ref = static_cast<const v1::TensorRef&>(refl->GetMessage(request, field));
    bound.present = true;
    bound.dtype = static_cast<DType>(ref.dtype());
    bound.shape.assign(ref.shape().begin(), ref.shape().end());

    const std::vector<DType> workspace_dtypes = {DType::kUINT8};
    const std::vector<DType>& allowed =
        spec.role == Role::kWorkspace ? workspace_dtypes : spec.dtypes;
    bool dtype_ok = false;
    for (DType t : allowed) dtype_ok = dtype_ok || t == bound.dtype;
    if (!dtype_ok) {
      return Invalid(
          op, spec.name,
          absl::StrCat("must be ", DTypeList(allowed), ", got ", kernels::DTypeName(bound.dtype)));
    }
    if (spec.role == Role::kWorkspace) {
      if (bound.shape.size() != 1 || bound.shape[0] < 0) {
        return Invalid(op, spec.name,
                       absl::StrCat("must be 1-D [bytes], got ", ShapeString(bound.shape)));
      }
    } else {
      RETURN_IF_ERROR(MatchShape(op, spec, bound.shape, call.dims));
    }
    if (!ref.strides().empty()) {
      const std::optional<std::vector<int64_t>> contiguous = ContiguousStrides(bound.shape);
      if (!contiguous) {
        return Invalid(op, spec.name, absl::StrCat("is too large: ", ShapeString(bound.shape)));
      }
      const std::vector<int64_t> strides(ref.strides().begin(), ref.strides().end());
      if (strides != *contiguous) {
        return Invalid(op, spec.name,
                       absl::StrCat("must be contiguous (strides ", ShapeString(*contiguous),
                                    "), got strides ", ShapeString(strides)));
      }
    }
    ASSIGN_OR_RETURN(bound.bytes, ByteSize(op, spec.name, bound.shape, bound.dtype));

    auto pin = pinned.find(ref.region_id());
    if (pin == pinned.end()) {
      auto region = regions.Pin(session_id, ref.region_id());
      if (!region.ok()) {
        return absl::Status(region.status().code(), absl::StrCat(op.name, ": ", spec.name, ": ",
                                                                 region.status().message()));
      }
      pin = pinned.emplace(ref.region_id(), *std::move(region)).first;
    }
    const Region& region = *pin->second;
    if (region.kind != options.memory) {
      return absl::FailedPreconditionError(absl::StrCat(
          op.name, ": ", spec.name, " lies in a ", RegionKindName(region.kind),
          " region, but this daemon computes on ", RegionKindName(options.memory), " memory"));
    }
    const uint64_t dtype_align = static_cast<uint64_t>(kernels::DTypeBytes(bound.dtype));
    const uint64_t align = std::max(dtype_align, spec.align);
    // The address, not only the offset: a region need not start on the boundary (uintptr_t
    // wraps modulo 2^64, a multiple of align, so the sum's remainder is still exact).
    const uintptr_t address = reinterpret_cast<uintptr_t>(region.range.base) + ref.offset();
    if (ref.offset() % align != 0 || address % align != 0) {
      return Invalid(
          op, spec.name,
          absl::StrCat("is misaligned: offset ", ref.offset(), " in region ", region.id,
                       " is not at a multiple of ", align, " bytes (",
                       align > dtype_align ? "the kernels access it in pieces of that size"
                                           : kernels::DTypeName(bound.dtype),
                       ")"));
    }
    if (!RangeInside(ref.offset(), bound.bytes, region.range.size)) {
      return Invalid(op, spec.name,
                     absl::StrCat("lies outside region ", region.id, ": offset ", ref.offset(),
                                  " + ", bound.bytes, " bytes > region size ", region.range.size));
    }
    // One call runs on one GPU: the one that holds its first tensor.
    if (first_tensor == nullptr) {
      first_tensor = &spec;
      first_region = &region;
      call.device = region.range.device;
      call.gpu_uuid = region.range.gpu_uuid;
    } else if (region.range.device != call.device) {
      return Invalid(op, spec.name,
                     absl::StrCat("is on GPU ", region.range.gpu_uuid, " but ", first_tensor->name,
                                  " is on GPU ", first_region->range.gpu_uuid,
                                  ": all tensors of one call must be on the same GPU"));
    }
    bound.data = region.range.base + ref.offset();
    placed.push_back(
        {spec.name, Placed{&region, ref.offset(), bound.bytes,
                           spec.role == Role::kOutput || spec.role == Role::kOptionalOutput ||
                               spec.role == Role::kWorkspace}});
  }

  // An output that overlaps any other tensor would be read and written by different threads of
  // one kernel: reject instead of computing garbage.
  for (size_t i = 0; i < placed.size(); ++i) {
    for (size_t j = i + 1; j < placed.size(); ++j) {
      const Placed& a = placed[i].second;
      const Placed& b = placed[j].second;
      if (!(a.output || b.output) || a.region != b.region || a.bytes == 0 || b.bytes == 0) continue;
      if (a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes) {
        return Invalid(op, placed[i].first, absl::StrCat("overlaps ", placed[j].first));
      }
    }
  }

  if (op.check) RETURN_IF_ERROR(op.check(call));

  for (const TensorSpec& spec : op.tensors) {
    if (spec.role != Role::kWorkspace || !call.has(spec.name)) continue;
    if (!options.needs_workspace || !op.workspace_bytes) continue;
    const int64_t need = op.workspace_bytes(call.dims);
    if (static_cast<int64_t>(call.tensor(spec.name).bytes) < need) {
      return Invalid(op, spec.name,
                     absl::StrCat("has ", call.tensor(spec.name).bytes, " bytes; ", op.name,
                                  " needs ", need, " for these shapes"));
    }
  }

  for (auto& [id, region] : pinned) call.pins.push_back(std::move(region));
  return call;
}

}  // namespace cakegrad::server
