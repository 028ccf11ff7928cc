// cp.async (sm_80+), the register-free global -> shared copies of the conv1d, mHC and KDA kernels.
// One set of wrappers so that every kernel gets the same "memory" clobbers: without them the
// compiler may move a shared load of staged data above the wait that makes it valid (the KDA
// forward's own copies once lacked the clobber on the wait and the commit).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cakegrad::kernels {

// kBytes (4, 8 or 16) from global to shared memory. 16-byte copies go through L2 only (.cg);
// PTX allows .cg for 16 bytes alone, so smaller copies also allocate in L1 (.ca).
template <int kBytes>
__device__ __forceinline__ void CpAsync(void* smem, const void* gmem) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(kBytes)
                 : "memory");
  }
}

// The same with a source size: valid == false reads nothing and writes kBytes zero bytes, which
// is how the kernels pad past the ends of their tensors (`gmem` must still be a valid address).
template <int kBytes>
__device__ __forceinline__ void CpAsyncZfill(void* smem, const void* gmem, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int n = valid ? kBytes : 0;
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(gmem), "n"(kBytes),
                 "r"(n)
                 : "memory");
  }
}

// Closes the group of the copies this thread issued since its last commit.
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most kPending of this thread's newest groups are still in flight. Other threads'
// copies need a barrier after it as well.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// Asks the copy engine to bring [p, p + bytes) into L2 (sm_90; bytes a multiple of 16, p 16-byte
// aligned). Holds no registers and completes on its own.
__device__ __forceinline__ void PrefetchL2(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}

}  // namespace cakegrad::kernels
