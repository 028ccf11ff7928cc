// Whether the SFU's approximations err to one side: the mean signed error (in ulps of the result,
// and relative) against FP64 of ex2.approx (Ex2Ftz) and of three ways to reduce its argument
// first, of expf, of rcp.approx (RcpFtz) and rsqrt.approx (RsqrtFtz) with their IEEE and
// Newton-refined forms, and of the gate sigmoid, over the argument ranges the KDA kernels feed
// them. The question behind it (thirty-ninth session): the fast-decay dA_log tail draws were
// larger on the H200 than in the host emulator, which draws each SFU result's error from a hash,
// unbiased; a one-sided device error would correlate the terms of that cancelling sum. The
// answers are in bench/results/kda_h200.md (thirty-ninth session).
// Build: nvcc -arch=sm_90a -O2 -std=c++17 -I kernels/cuda -o sfu_bias_probe \
//          tools/gpu/probes/sfu_bias_probe.cu
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_check.h"
#include "sfu_math.cuh"

namespace {

enum Fn { kEx2, kEx2Floor, kEx2Rint, kEx2Lift, kExpf, kRcp, kFns };
const char* const kNames[kFns] = {"Ex2Ftz(y)",
                                  "2^floor(y) Ex2Ftz(y - floor y)",
                                  "2^rint(y) Ex2Ftz(y - rint y)",
                                  "Ex2Ftz(y) (1 + 5.13e-8)",
                                  "expf(y ln2) vs 2^y",
                                  "RcpFtz(1 + 2^y)"};

// 2^j r for integer j (r in [0.5, 2]): exact while the result is normal.
__device__ float Scale2(float r, float j) {
  return r * __int_as_float((static_cast<int>(j) + 127) << 23);
}

__global__ void Eval(const float* y, float* out, int64_t n) {
  using cakegrad::kernels::Ex2Ftz;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = y[i];
    const float r = Ex2Ftz(v);
    out[kEx2 * n + i] = r;
    const float jf = floorf(v), jr = rintf(v);
    out[kEx2Floor * n + i] = Scale2(Ex2Ftz(v - jf), jf);
    out[kEx2Rint * n + i] = Scale2(Ex2Ftz(v - jr), jr);
    out[kEx2Lift * n + i] = fmaf(r, 5.13e-8f, r);
    out[kExpf * n + i] = expf(v * 0.693147180559945309f);
    out[kRcp * n + i] = cakegrad::kernels::RcpFtz(1.0f + r);
  }
}

double Ulp(float y) {
  const float a = std::fabs(y);
  return static_cast<double>(std::nextafter(a, 1e38f)) - a;
}

// Signed error statistics of one function over one range, in ulps of the exact result and
// relative: the mean says whether it errs to one side.
struct ErrorStats {
  double s_ulp = 0, s_abs = 0, s_rel = 0, mx = 0;
  int64_t neg = 0, pos = 0, used = 0;
  void Add(float got, double ref) {
    const double e = (static_cast<double>(got) - ref) / Ulp(static_cast<float>(ref));
    s_ulp += e;
    s_abs += std::fabs(e);
    s_rel += (got - ref) / ref;
    mx = std::fmax(mx, std::fabs(e));
    neg += e < 0;
    pos += e > 0;
    ++used;
  }
  void Print(const char* var, const char* range, const char* name) const {
    std::printf(
        "%s in %-12s %-32s n %9lld | mean err %+.4f ulp, mean |err| %.4f, max %.2f | "
        "mean rel %+.3e | below %.3f above %.3f\n",
        var, range, name, static_cast<long long>(used), s_ulp / used, s_abs / used, mx,
        s_rel / used, double(neg) / used, double(pos) / used);
  }
};

void Report(const char* range, const std::vector<float>& y, const std::vector<float>& out,
            int64_t n) {
  for (int f = 0; f < kFns; ++f) {
    ErrorStats st;
    for (int64_t i = 0; i < n; ++i) {
      double ref = std::exp2(static_cast<double>(y[i]));
      if (f == kExpf) ref = std::exp(static_cast<double>(y[i] * 0.693147180559945309f));
      if (f == kRcp) ref = 1.0 / (1.0 + static_cast<double>(out[kEx2 * n + i]));
      const float got = out[f * n + i];
      if (!(ref > 1.2e-38) || got == 0.f || !std::isfinite(got)) continue;  // FTZ range
      st.Add(got, ref);
    }
    st.Print("y", range, kNames[f]);
  }
}

// The reciprocal square root (the chunked kernels' q and k norms: x = sum of 128 squares +
// 1e-6) and the gate sigmoid 1 / (1 + 2^(-z log2 e)) built on ex2 and rcp.
enum Fn2 { kRsqrtFtz, kRsqrtf, kRsqrtIeee, kRsqrtNewton, kSigmoid, kSigmoidExpf, kFns2 };
static_assert(static_cast<int>(kFns2) <= static_cast<int>(kFns),
              "the second study reuses the first one's output buffer");
const char* const kNames2[kFns2] = {"RsqrtFtz(x)",         "rsqrtf(x)",
                                    "1 / sqrtf(x) (IEEE)", "RsqrtFtz + Newton step",
                                    "GateSigmoid(x)",      "1 / (1 + expf(-x)) (IEEE div)"};

__global__ void Eval2(const float* x, float* out, int64_t n) {
  using namespace cakegrad::kernels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    const float r = RsqrtFtz(v);
    out[kRsqrtFtz * n + i] = r;
    out[kRsqrtf * n + i] = rsqrtf(v);
    out[kRsqrtIeee * n + i] = 1.0f / sqrtf(v);
    out[kRsqrtNewton * n + i] = fmaf(r * fmaf(-0.5f * v, r * r, 0.5f), 1.0f, r);
    out[kSigmoid * n + i] = RcpFtz(1.0f + Ex2Ftz(v * -1.44269504088896340736f));
    out[kSigmoidExpf * n + i] = 1.0f / (1.0f + expf(-v));
  }
}

void Report2(const char* range, const std::vector<float>& x, const std::vector<float>& out,
             int64_t n, bool sigmoid) {
  for (int f = sigmoid ? kSigmoid : 0; f < (sigmoid ? kFns2 : kSigmoid); ++f) {
    ErrorStats st;
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i];
      st.Add(out[f * n + i], sigmoid ? 1.0 / (1.0 + std::exp(-v)) : 1.0 / std::sqrt(v));
    }
    st.Print("x", range, kNames2[f]);
  }
}

// x uniform in [lo, hi) from an xorshift stream (24 random bits a value), the same every run.
void FillUniform(std::vector<float>& x, float lo, float hi, uint64_t s) {
  for (float& v : x) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v = lo + (hi - lo) * static_cast<float>((s >> 40) * 0x1.0p-24);
  }
}

}  // namespace

int main() {
  const int64_t n = 1 << 24;
  struct Range {
    const char* name;
    float lo, hi;
  } ranges[] = {{"[-115,0]", -115.f, 0.f}, {"[-1,0]", -1.f, 0.f},     {"[0,1]", 0.f, 1.f},
                {"[-.5,.5]", -.5f, .5f},   {"[-12,-4]", -12.f, -4.f}, {"[0,100]", 0.f, 100.f}};
  float *dx = nullptr, *dout = nullptr;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, kFns * n * sizeof(float)));
  std::vector<float> x(n), out(kFns * n);
  for (const Range& r : ranges) {
    FillUniform(x, r.lo, r.hi, 0x9E3779B97F4A7C15ull);
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    Eval<<<1024, 256>>>(dx, dout, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(out.data(), dout, kFns * n * sizeof(float), cudaMemcpyDeviceToHost));
    Report(r.name, x, out, n);
  }
  // rsqrt on the norms' range (sum of 128 squares of N(0, 1) values: ~128), then the sigmoid on
  // the gates' arguments (A (g + dt_bias): ~N(0, 1.5) and, in the fast-decay tests, 2 .. 20).
  const Range ranges2[] = {
      {"[1,4]", 1.f, 4.f}, {"[64,256]", 64.f, 256.f}, {"[-5,5]", -5.f, 5.f}, {"[2,20]", 2.f, 20.f}};
  for (int ri = 0; ri < 4; ++ri) {
    const Range& r = ranges2[ri];
    FillUniform(x, r.lo, r.hi, 0x2545F4914F6CDD1Dull);
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    Eval2<<<1024, 256>>>(dx, dout, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(out.data(), dout, kFns2 * n * sizeof(float), cudaMemcpyDeviceToHost));
    Report2(r.name, x, out, n, ri >= 2);
  }
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dout));
  return 0;
}
