// What FP64 arithmetic rate one kernel can reach on this GPU: the FP64 tensor-core MMAs
// (mma.sync m8n8k4 and sm_90's m16n8k16, f64 in and out) and plain DFMA, each with independent
// accumulators per warp so that the pipe, not latency, is the limit. The question behind it
// (twenty-fifth session): could a chunked KDA backward in FP64 (accurate dA_log at few heads,
// bench/results/kda_h200.md) run near the chunked FP32 one's speed?
// Build: nvcc -arch=sm_90a -O2 -std=c++17 -o fp64_mma_probe tools/gpu/probes/fp64_mma_probe.cu
#include <cstdio>

#include "probe_check.h"

namespace {

constexpr int kAcc = 4;  // independent accumulator tiles per warp

__global__ void Mma884(int iters, double* out) {
  double a = 1.0 + threadIdx.x * 1e-3, b = 1.0 - threadIdx.x * 1e-3;
  double c[kAcc][2] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      asm volatile(
          "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
          : "+d"(c[j][0]), "+d"(c[j][1])
          : "d"(a), "d"(b));
    }
  }
  double s = 0.0;
#pragma unroll
  for (int j = 0; j < kAcc; ++j) s += c[j][0] + c[j][1];
  if (s == 12345.678) out[0] = s;  // keeps the loop alive
}

__global__ void Mma16816(int iters, double* out) {
  double a[8], b[4];
#pragma unroll
  for (int i = 0; i < 8; ++i) a[i] = 1.0 + (threadIdx.x + i) * 1e-3;
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = 1.0 - (threadIdx.x + i) * 1e-3;
  double c[kAcc][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};\n"
          : "+d"(c[j][0]), "+d"(c[j][1]), "+d"(c[j][2]), "+d"(c[j][3])
          : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
            "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
    }
  }
  double s = 0.0;
#pragma unroll
  for (int j = 0; j < kAcc; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == 12345.678) out[0] = s;
}

__global__ void Dfma(int iters, double* out) {
  double x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = 1.0 + (threadIdx.x + i) * 1e-9;
  const double m = 0.999999, k = 1e-7;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = fma(x[i], m, k);
  }
  double s = 0.0;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += x[i];
  if (s == 12345.678) out[0] = s;
}

template <typename Kernel>
void Time(const char* name, Kernel kernel, int sms, int warps, int iters, double flop_per_warp_iter,
          double* out) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  kernel<<<sms, 32 * warps>>>(iters, out);  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(e0));
  kernel<<<sms, 32 * warps>>>(iters, out);
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0.f;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  const double flop = flop_per_warp_iter * iters * warps * double(sms);
  std::printf("%-28s %2d warps/SM  %8.3f ms  %7.2f TFLOP/s\n", name, warps, ms,
              flop / (ms * 1e-3) / 1e12);
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const int sms = prop.multiProcessorCount;
  double* out = nullptr;
  CHECK(cudaMalloc(&out, sizeof(double)));
  const int iters = 1 << 14;
  for (int warps : {4, 8, 16}) {
    Time("mma m8n8k4 f64", Mma884, sms, warps, iters, kAcc * 2.0 * 8 * 8 * 4, out);
    // 154 registers a thread: 16 warps an SM do not fit (the first run stopped there).
    if (warps <= 8) {
      Time("mma m16n8k16 f64", Mma16816, sms, warps, iters / 4, kAcc * 2.0 * 16 * 8 * 16, out);
    }
    Time("DFMA (8 chains a thread)", Dfma, sms, warps, iters, 32 * 8 * 2.0, out);
  }
  CHECK(cudaFree(out));
  return 0;
}
