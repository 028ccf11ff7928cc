// As run in call 1 (the first form of tools/gpu/probes/sfu_bias_probe.cu, arguments in nats):
// expf(x), Ex2Ftz(x log2 e) against 2^(the rounded product), DecayExp(x) against e^x, RcpFtz.
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <vector>

#include "probe_check.h"
#include "sfu_math.cuh"

namespace {

constexpr float kLog2e = 1.44269504088896340736f;

enum Fn { kExpf, kEx2, kDecayExp, kRcp, kFns };
const char* const kNames[kFns] = {"expf(x)", "Ex2Ftz(x log2e as y)", "DecayExp(x)=Ex2Ftz(x*log2e)",
                                  "RcpFtz(1+y)"};

__global__ void Eval(const float* x, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    out[kExpf * n + i] = expf(v);
    out[kEx2 * n + i] = cakegrad::kernels::Ex2Ftz(v * kLog2e);
    out[kDecayExp * n + i] = cakegrad::kernels::Ex2Ftz(v * kLog2e);
    out[kRcp * n + i] = cakegrad::kernels::RcpFtz(1.0f - v / 80.0f);
  }
}

double Ulp(float y) {
  const float a = std::fabs(y);
  return static_cast<double>(std::nextafter(a, 1e38f)) - a;
}

void Report(const char* range, const std::vector<float>& x, const std::vector<float>& out,
            int64_t n) {
  for (int f = 0; f < kFns; ++f) {
    double s_ulp = 0, s_abs = 0, s_rel = 0, mx = 0;
    int64_t neg = 0, pos = 0, used = 0;
    for (int64_t i = 0; i < n; ++i) {
      double ref, arg = x[i];
      switch (f) {
        case kExpf:
          ref = std::exp(arg);
          break;
        case kEx2:  // against 2^y of the rounded product: the SFU's own error
          ref = std::exp2(static_cast<double>(static_cast<float>(arg * kLog2e)));
          break;
        case kDecayExp:  // against e^x: the product's rounding included
          ref = std::exp(arg);
          break;
        default:
          ref = 1.0 / static_cast<double>(1.0f - x[i] / 80.0f);
          break;
      }
      const float y = out[f * n + i];
      if (!(ref > 1.2e-38) || y == 0.f) continue;  // FTZ range
      const double e = (static_cast<double>(y) - ref) / Ulp(static_cast<float>(ref));
      s_ulp += e;
      s_abs += std::fabs(e);
      s_rel += (y - ref) / ref;
      mx = std::fmax(mx, std::fabs(e));
      neg += e < 0;
      pos += e > 0;
      ++used;
    }
    std::printf("%-10s %-30s n %9lld | mean err %+.4f ulp, mean |err| %.4f ulp, max %.2f ulp | "
                "mean rel %+.3e | below %.3f above %.3f\n",
                range, kNames[f], static_cast<long long>(used), s_ulp / used, s_abs / used, mx,
                s_rel / used, double(neg) / used, double(pos) / used);
  }
}

}  // namespace

int main() {
  const int64_t n = 1 << 24;
  struct Range {
    const char* name;
    float lo, hi;
  } ranges[] = {{"[-1,0]", -1.f, 0.f}, {"[-8,0]", -8.f, 0.f}, {"[-80,0]", -80.f, 0.f}};
  float *dx = nullptr, *dout = nullptr;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, kFns * n * sizeof(float)));
  std::vector<float> x(n), out(kFns * n);
  for (const Range& r : ranges) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < n; ++i) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      x[i] = r.lo + (r.hi - r.lo) * static_cast<float>((s >> 40) * 0x1.0p-24);
    }
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    Eval<<<1024, 256>>>(dx, dout, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(out.data(), dout, kFns * n * sizeof(float), cudaMemcpyDeviceToHost));
    Report(r.name, x, out, n);
  }
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dout));
  return 0;
}
