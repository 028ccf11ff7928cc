// How this GPU's BF16 tensor cores (mma.sync m16n8k16, FP32 accumulate) add: how many bits below
// the largest term survive the alignment of the 16 products and the accumulator, and which way
// the sum is rounded. One MMA per case, only D[0][0] used: D = C + sum_k A[0][k] B[k][0], with
// B[k][0] = 1, so the A row and C are the terms. The question behind it (thirty-ninth session):
// the host emulator (tools/emu) sums each MMA in FP32 rounding to nearest unless EMU_MMA_RZ or
// EMU_MMA_TRUNC model a truncating accumulation, and the fast-decay dA_log tail draws differ
// between it and the H200; this says which model is the H200's (bench/results/kda_h200.md).
// Build: nvcc -arch=sm_90a -O2 -std=c++17 -I tools/gpu/probes -o mma_accum_probe \
//          tools/gpu/probes/mma_accum_probe.cu
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_check.h"

namespace {

constexpr int kCases = 256;

// One warp a case: A's row 0 = a[case][0..15], B's column 0 = ones, C[0][0] = c[case]; the
// other elements are zero. Fragment layouts of the PTX ISA (groupID g = lane / 4, q = lane % 4).
__global__ void OneMma(const float* a, const float* c, float* d) {
  const int cs = blockIdx.x, lane = threadIdx.x, g = lane / 4, q = lane % 4;
  auto pack = [](float lo, float hi) {
    const __nv_bfloat162 h = __halves2bfloat162(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
    return *reinterpret_cast<const uint32_t*>(&h);
  };
  const float* ar = a + cs * 16;
  // a0: (row g, cols 2q, 2q + 1), a1: row g + 8, a2: (row g, cols 2q + 8, 2q + 9), a3: row g + 8
  const uint32_t a0 = g == 0 ? pack(ar[2 * q], ar[2 * q + 1]) : 0u;
  const uint32_t a2 = g == 0 ? pack(ar[2 * q + 8], ar[2 * q + 9]) : 0u;
  const uint32_t a1 = 0u, a3 = 0u;
  // b0: (rows 2q, 2q + 1, col g), b1: rows 2q + 8, 2q + 9
  const uint32_t b0 = g == 0 ? pack(1.f, 1.f) : 0u, b1 = b0;
  float d0 = (g == 0 && q == 0) ? c[cs] : 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  if (lane == 0) d[cs] = d0;
}

struct Case {
  const char* what;
  int k;
  std::vector<float> a;
  float c;
};

}  // namespace

int main() {
  std::vector<Case> cases;
  // 1. Alignment: the large term 1 among the products, fifteen terms 2^-k: exact 1 + 15 2^-k. A
  //    sum kept to p bits below the leading one keeps each small term while k < p.
  for (int k = 18; k <= 34; ++k) {
    std::vector<float> a(16, std::ldexp(1.f, -k));
    a[0] = 1.f;
    cases.push_back({"product 1 + 15 products 2^-k", k, a, 0.f});
  }
  // 2. The same with the large term in the accumulator (16 products 2^-k, C = 1).
  for (int k = 18; k <= 34; ++k) {
    cases.push_back(
        {"C = 1 + 16 products 2^-k", k, std::vector<float>(16, std::ldexp(1.f, -k)), 1.f});
  }
  // 3. Rounding: C = +-1, terms 2^-24 + 2^-25 (0.75 ulp of 1): nearest gives 1 + 2^-23, toward
  //    zero 1. And 2^-24 alone (a tie): nearest-even gives 1.
  for (float s : {1.f, -1.f}) {
    std::vector<float> a(16, 0.f);
    a[0] = s * std::ldexp(1.f, -24);
    a[1] = s * std::ldexp(1.f, -25);
    cases.push_back({s > 0 ? "C = 1, + 0.75 ulp" : "C = -1, - 0.75 ulp", 24, a, s});
    std::vector<float> b(16, 0.f);
    b[0] = s * std::ldexp(1.f, -24);
    b[1] = s * std::ldexp(1.f, -26);
    b[2] = s * std::ldexp(1.f, -26);
    cases.push_back({s > 0 ? "C = 1, + 0.5 + 0.25 + 0.25 ulp over 3 products"
                           : "C = -1, - (0.5 + 0.25 + 0.25) ulp",
                     24, b, s});
  }
  // 4. Cancellation: C = 1, a product -1 and a product 2^-k: exact 2^-k (no alignment loss if
  //    the sum is formed before it is normalised).
  for (int k : {10, 24, 30, 40}) {
    std::vector<float> a(16, 0.f);
    a[0] = -1.f;
    a[1] = std::ldexp(1.f, -k);
    cases.push_back({"C = 1, products -1 and 2^-k", k, a, 1.f});
  }
  // 5. A sum that carries into a higher exponent: C = 1 + 2^-23 (an odd last bit), products
  //    1 + 2^-7 and 1: exact 3 + 2^-7 + 2^-23, whose last bit FP32 cannot keep at that exponent.
  {
    std::vector<float> a(16, 0.f);
    a[0] = 1.f + std::ldexp(1.f, -7);  // BF16 has 8 bits: 1 + 2^-7 is exact
    a[1] = 1.f;
    cases.push_back(
        {"C = 2^-23 + 1, products (1 + 2^-7) and 1", 23, a, 1.f + std::ldexp(1.f, -23)});
  }
  const int n = static_cast<int>(cases.size());
  if (n > kCases) {
    std::fprintf(stderr, "%d cases, room for %d\n", n, kCases);
    return 1;
  }
  std::vector<float> a(kCases * 16, 0.f), c(kCases, 0.f), d(kCases, 0.f);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 16; ++k) a[i * 16 + k] = cases[i].a[k];
    c[i] = cases[i].c;
  }
  float *da, *dc, *dd;
  CHECK(cudaMalloc(&da, a.size() * 4));
  CHECK(cudaMalloc(&dc, c.size() * 4));
  CHECK(cudaMalloc(&dd, d.size() * 4));
  CHECK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dc, c.data(), c.size() * 4, cudaMemcpyHostToDevice));
  OneMma<<<n, 32>>>(da, dc, dd);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    double exact = cases[i].c;
    for (float v : cases[i].a) exact += v;
    const double small = std::ldexp(1.0, -cases[i].k);
    std::printf("%-48s k %2d | got %.10e exact %.10e | (got - exact) / 2^-k %+.4f\n", cases[i].what,
                cases[i].k, d[i], exact, (d[i] - exact) / small);
  }
  CHECK(cudaFree(da));
  CHECK(cudaFree(dc));
  CHECK(cudaFree(dd));
  return 0;
}
