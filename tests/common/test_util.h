// Host-side helpers shared by the kernel, GPU and integration tests: fresh random inputs,
// poisoning, and the error measures SPEC.md defines.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cakegrad/kernels/tensor.h"

namespace cakegrad::testing {

// A fresh seed per call site unless the test pins one: inputs are never zeros or constants.
inline std::mt19937_64& Rng() {
  static std::mt19937_64 rng(std::random_device{}());
  return rng;
}

inline std::vector<uint16_t> RandomBf16(size_t n, double mean = 0.0, double stddev = 1.0) {
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<uint16_t> out(n);
  for (auto& v : out) v = kernels::FloatToBf16(static_cast<float>(dist(Rng())));
  return out;
}

inline std::vector<float> RandomFloat(size_t n, double mean = 0.0, double stddev = 1.0) {
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<float> out(n);
  for (auto& v : out) v = static_cast<float>(dist(Rng()));
  return out;
}

inline std::vector<float> UniformFloat(size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<float> out(n);
  for (auto& v : out) v = static_cast<float>(dist(Rng()));
  return out;
}

// BF16 0xFFFF / FP32 0xFFFFFFFF are NaNs: an element a kernel forgot to write shows up.
constexpr uint16_t kPoisonBf16 = 0xFFFF;
constexpr uint32_t kPoisonFp32Bits = 0xFFFFFFFFu;

inline std::vector<double> Bf16ToDouble(const std::vector<uint16_t>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = kernels::Bf16ToFloat(v[i]);
  return out;
}

template <typename T>
std::vector<double> ToDouble(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// ||out - exact|| / ||exact||; +inf if out holds a non-finite value (NaN never passes).
// Both empty, or both exactly zero, count as 0.
inline double RelL2(const std::vector<double>& out, const std::vector<double>& exact) {
  if (out.size() != exact.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    const double d = out[i] - exact[i];
    num += d * d;
    den += exact[i] * exact[i];
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

// Distance between two BF16 values in units of the BF16 spacing at `exact`.
inline double Bf16UlpsFrom(double value, double exact) {
  const double mag = std::fabs(exact);
  const double ulp = mag < 1e-38 ? std::ldexp(1.0, -133) : std::ldexp(1.0, std::ilogb(mag) - 7);
  return std::fabs(value - exact) / ulp;
}

}  // namespace cakegrad::testing
