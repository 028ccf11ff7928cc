// Host-side BF16 conversions, the rel-L2 metric and the output hash of the KDA emulation drivers
// (tools/emu).
#pragma once
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kda_emu {

inline uint16_t ToBf(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
inline float FromBf(uint16_t u) {
  uint32_t b = uint32_t(u) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline double RoundBf(double x) { return FromBf(ToBf(static_cast<float>(x))); }
// x as the records store it: BF16 hi, and the BF16 rounding of what hi leaves of float(x).
inline void SplitTo(double x, uint16_t* hi, uint16_t* lo) {
  const float f = static_cast<float>(x);
  *hi = ToBf(f);
  *lo = ToBf(f - FromBf(*hi));
}
inline double RelL2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}
// FNV-1a over the bytes of outputs, the drivers' fingerprint of a run (equal hashes: equal bits).
struct Fnv1a {
  uint64_t hash = 1469598103934665603ull;
  void Add(const void* data, size_t bytes) {
    const auto* c = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) hash = (hash ^ c[i]) * 1099511628211ull;
  }
};

}  // namespace kda_emu
