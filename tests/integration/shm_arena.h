// Tensors laid out in one registered shared-memory region, for host-backend tests.
#pragma once

#include <cstring>
#include <vector>

#include "cakegrad/client/client.h"
#include "cakegrad/client/shared_memory.h"
#include "common/test_util.h"
#include "gtest/gtest.h"

namespace cakegrad::testing {

class ShmArena {
 public:
  // Creates and registers `bytes` of shared memory with `client`.
  ShmArena(Client& client, uint64_t bytes) {
    auto buf = SharedMemoryBuffer::Create(bytes);
    EXPECT_TRUE(buf.ok()) << buf.status();
    buffer_ = std::make_unique<SharedMemoryBuffer>(*std::move(buf));
    auto id = client.RegisterHostRegion(buffer_->name(), buffer_->size(), "arena");
    EXPECT_TRUE(id.ok()) << id.status();
    region_ = id.ok() ? *id : 0;
  }

  // A tensor at the next 64-byte boundary, its bytes set to `fill`.
  Tensor Alloc(DType dtype, std::vector<int64_t> shape, uint8_t fill = 0xFF) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const uint64_t bytes = static_cast<uint64_t>(n * kernels::DTypeBytes(dtype));
    EXPECT_LE(next_ + bytes, buffer_->size()) << "arena too small";
    Tensor t{region_, next_, dtype, std::move(shape)};
    std::memset(buffer_->data() + next_, fill, bytes);
    next_ += (bytes + 63) / 64 * 64;
    return t;
  }

  template <typename T>
  Tensor Put(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
    Tensor t = Alloc(dtype, std::move(shape));
    // An empty vector's data() may be null, which memcpy must not be given even for 0 bytes.
    if (!values.empty()) {
      std::memcpy(buffer_->data() + t.offset, values.data(), values.size() * sizeof(T));
    }
    return t;
  }

  template <typename T>
  T* data(const Tensor& t) const {
    return reinterpret_cast<T*>(buffer_->data() + t.offset);
  }
  template <typename T>
  std::vector<T> Get(const Tensor& t) const {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    return std::vector<T>(data<T>(t), data<T>(t) + n);
  }

  uint64_t region() const { return region_; }
  const SharedMemoryBuffer& buffer() const { return *buffer_; }

 private:
  std::unique_ptr<SharedMemoryBuffer> buffer_;
  uint64_t region_ = 0;
  uint64_t next_ = 0;
};

// A valid conv1d backward (two documents, fresh random inputs) in its own registered arena, for
// tests to run as is or to break one argument at a time.
struct Conv1dCall {
  explicit Conv1dCall(Client& client, int64_t S = 64, int64_t C = 8)
      : arena(client, (1 << 16) + 8 * S * C), S(S), C(C) {
    const std::vector<int32_t> cuts = {0, static_cast<int32_t>(S / 2), static_cast<int32_t>(S)};
    args.x = arena.Put(DType::kBF16, {S, C}, RandomBf16(S * C));
    args.weight = arena.Put(DType::kFP32, {C, 4}, RandomFloat(C * 4));
    args.cu_seqlens = arena.Put(DType::kINT32, {3}, cuts);
    args.dy = arena.Put(DType::kBF16, {S, C}, RandomBf16(S * C));
    args.dx = arena.Alloc(DType::kBF16, {S, C});
    args.dweight = arena.Alloc(DType::kFP32, {C, 4});
  }
  ShmArena arena;
  int64_t S, C;
  Conv1dBackwardArgs args;
};

}  // namespace cakegrad::testing
