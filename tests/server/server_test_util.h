// Stand-ins shared by the daemon's unit tests: host memory in place of a mapped region, and
// TensorRefs built in one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cakegrad/v1/tensor.pb.h"
#include "regions/region.h"

namespace cakegrad::server::test_support {

// `bytes` of zeroed host memory as a mapped range that owns it (the registry keeps it alive).
inline MappedRange OwnedHostRange(size_t bytes, int device = -1, std::string gpu_uuid = "") {
  struct VectorMapping : Mapping {
    explicit VectorMapping(size_t n) : data(n) {}
    std::vector<std::byte> data;
  };
  auto mapping = std::make_shared<VectorMapping>(bytes);
  MappedRange range;
  range.base = mapping->data.data();
  range.size = bytes;
  range.device = device;
  range.gpu_uuid = std::move(gpu_uuid);
  range.mapping = std::move(mapping);
  return range;
}

inline v1::TensorRef Ref(uint64_t region, uint64_t offset, v1::DType dtype,
                         const std::vector<int64_t>& shape) {
  v1::TensorRef ref;
  ref.set_region_id(region);
  ref.set_offset(offset);
  ref.set_dtype(dtype);
  for (int64_t d : shape) ref.add_shape(d);
  return ref;
}

}  // namespace cakegrad::server::test_support
