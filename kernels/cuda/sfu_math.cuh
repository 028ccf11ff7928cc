// The SFU's exp2, reciprocal and reciprocal square root with denormals flushed, for the kernels
// whose per-element arithmetic is built on them (conv1d's SiLU and its derivative, KDA's gates
// and decays). Without .ftz the compiler wraps ex2 in a range test and two scalings (three more
// instructions per element, measured in SASS) to produce denormal results that none of them can
// use: a factor below 2^-126 adds nothing an FP32 sum of O(1) terms keeps.
#pragma once

namespace cakegrad::kernels {

// 2^x, ~2 ulp.
__device__ __forceinline__ float Ex2Ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// 1 / x, 1 ulp.
__device__ __forceinline__ float RcpFtz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// 1 / sqrt(x), 2 ulp.
__device__ __forceinline__ float RsqrtFtz(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace cakegrad::kernels
