#include "slow_producer.h"

namespace cakegrad::testing {
namespace {

__global__ void Spin(long long nanoseconds) {
  long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= nanoseconds) break;
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t SpinOnStream(cudaStream_t stream, int microseconds) {
  Spin<<<1, 1, 0, stream>>>(static_cast<long long>(microseconds) * 1000);
  return cudaGetLastError();
}

cudaError_t SlowCopy(void* dst, const void* src, size_t bytes, int milliseconds,
                     cudaStream_t stream) {
  if (cudaError_t err = SpinOnStream(stream, milliseconds * 1000); err != cudaSuccess) return err;
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
}

}  // namespace cakegrad::testing
