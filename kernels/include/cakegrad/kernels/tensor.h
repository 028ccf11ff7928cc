// Element types and host-side BF16 conversions shared by every operator family.
// Kernels see raw pointers; this header only names what those pointers hold.
#pragma once

#include <cstdint>
#include <cstring>

namespace cakegrad::kernels {

// Wire-stable numbering: proto/cakegrad/v1/tensor.proto uses the same values.
enum class DType : int32_t {
  kInvalid = 0,
  kBF16 = 1,
  kFP32 = 2,
  kINT32 = 3,
  kINT64 = 4,
  kUINT8 = 5,
};

constexpr int64_t DTypeBytes(DType t) {
  switch (t) {
    case DType::kBF16:
      return 2;
    case DType::kFP32:
    case DType::kINT32:
      return 4;
    case DType::kINT64:
      return 8;
    case DType::kUINT8:
      return 1;
    default:
      return 0;
  }
}

constexpr const char* DTypeName(DType t) {
  switch (t) {
    case DType::kBF16:
      return "bfloat16";
    case DType::kFP32:
      return "float32";
    case DType::kINT32:
      return "int32";
    case DType::kINT64:
      return "int64";
    case DType::kUINT8:
      return "uint8";
    default:
      return "invalid";
  }
}

// BF16 is stored as the top 16 bits of an IEEE float.
inline float Bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// FP64 -> BF16 through FP32 would double-round; the references round FP64 once to FP32 and
// then to BF16, which is what "computed in FP32 or wider, rounded once" allows for the kernels
// and is within the contract's tolerances for the oracle.
inline uint16_t DoubleToBf16(double d) { return FloatToBf16(static_cast<float>(d)); }

}  // namespace cakegrad::kernels
