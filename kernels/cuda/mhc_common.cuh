// Device helpers shared by the mHC kernels: BF16 packing, the warp-level BF16 tensor-core MMA,
// ldmatrix, the Sinkhorn forward of one token and the launch-error check.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "aligned.h"
#include "cakegrad/kernels/mhc.h"
#include "cluster_sync.cuh"
#include "cp_async.cuh"

namespace cakegrad::kernels::mhc_cuda {

constexpr int kLogits = kMhcLogits;

__device__ __forceinline__ float Bf16Lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float Bf16Hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

// Round-to-nearest-even pack of two floats; `lo` lands at the lower address.
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return reinterpret_cast<const uint32_t&>(h);
}

// Unpacks 8 BF16 values (one 16-byte load) to floats.
__device__ __forceinline__ void Unpack8(const uint4& v, float* f) {
  f[0] = Bf16Lo(v.x);
  f[1] = Bf16Hi(v.x);
  f[2] = Bf16Lo(v.y);
  f[3] = Bf16Hi(v.y);
  f[4] = Bf16Lo(v.z);
  f[5] = Bf16Hi(v.z);
  f[6] = Bf16Lo(v.w);
  f[7] = Bf16Hi(v.w);
}

__device__ __forceinline__ uint4 Pack8(const float* f) {
  return make_uint4(PackBf16(f[0], f[1]), PackBf16(f[2], f[3]), PackBf16(f[4], f[5]),
                    PackBf16(f[6], f[7]));
}

// D += A * B, m16n8k16, BF16 inputs, FP32 accumulation (sm_80+ warp-level MMA).
__device__ __forceinline__ void MmaBf16(float* d, uint32_t a0, uint32_t a1, uint32_t a2,
                                        uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Shared-memory loads from 32-bit shared addresses (volatile: they stay after the barrier waits).
__device__ __forceinline__ uint2 LdsU2(uint32_t s) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(s));
  return v;
}
__device__ __forceinline__ double LdsF64(uint32_t s) {
  double v;
  asm volatile("ld.shared.f64 %0, [%1];\n" : "=d"(v) : "r"(s));
  return v;
}
// A shared store this thread (or, after a barrier, another) reads back ("memory": kept in order).
__device__ __forceinline__ void StsF64(uint32_t s, double v) {
  asm volatile("st.shared.f64 [%0], %1;\n" ::"r"(s), "d"(v) : "memory");
}
__device__ __forceinline__ float LdsF32(uint32_t s) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(s));
  return v;
}
// Four 8x8 BF16 matrices; lanes 8i..8i+7 address the rows of matrix i, which lands in r[i].
// The ...Addr forms take a shared-memory address, the others a generic pointer into shared memory.
__device__ __forceinline__ void LdMatrixX4Addr(uint32_t s, uint32_t* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void LdMatrixX4(const void* smem, uint32_t* r) {
  LdMatrixX4Addr(static_cast<uint32_t>(__cvta_generic_to_shared(smem)), r);
}
// The same, each matrix transposed.
__device__ __forceinline__ void LdMatrixX4TransAddr(uint32_t s, uint32_t* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void LdMatrixX4Trans(const void* smem, uint32_t* r) {
  LdMatrixX4TransAddr(static_cast<uint32_t>(__cvta_generic_to_shared(smem)), r);
}

// A float of a cluster CTA's shared memory (an address from MapaShared).
__device__ __forceinline__ float LdsClusterF32(uint32_t s) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(s) : "memory");
  return v;
}

// L2 eviction policies for streamed data (evict first) and for scratch read back soon (evict
// last), and the accesses that take them.
__device__ __forceinline__ uint64_t CreateL2PolicyEvictFirst() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
__device__ __forceinline__ uint64_t CreateL2PolicyEvictLast() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
__device__ __forceinline__ void StGlobalF4Hint(float* p, float4 v, uint64_t policy) {
  asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w), "l"(policy)
               : "memory");
}
// Drops a 128-byte line of dead scratch from L2 without writing it back (p 128-byte aligned).
__device__ __forceinline__ void DiscardL2Line(const void* p) {
  asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(p) : "memory");
}

__device__ __forceinline__ float Sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

__device__ __forceinline__ int Group(int j) { return j < 4 ? 0 : (j < 8 ? 1 : 2); }

// Sinkhorn of SPEC.md section 1 for one token, by one thread, in FP32 with fixed sum orders.
__device__ __forceinline__ void SinkhornForward(const float* L, float eps, int iters, float* P) {
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const float mx = fmaxf(fmaxf(L[4 * a], L[4 * a + 1]), fmaxf(L[4 * a + 2], L[4 * a + 3]));
    float e[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) e[b] = expf(L[4 * a + b] - mx);
    const float s = (e[0] + e[1]) + (e[2] + e[3]);
#pragma unroll
    for (int b = 0; b < 4; ++b) P[4 * a + b] = e[b] / s + eps;
  }
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const float d = ((P[4 * a] + P[4 * a + 1]) + (P[4 * a + 2] + P[4 * a + 3])) + eps;
#pragma unroll
        for (int b = 0; b < 4; ++b) P[4 * a + b] /= d;
      }
    }
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const float d = ((P[b] + P[4 + b]) + (P[8 + b] + P[12 + b])) + eps;
#pragma unroll
      for (int a = 0; a < 4; ++a) P[4 * a + b] /= d;
    }
  }
}

inline Status LaunchStatus(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return Internal(std::string(what) + ": " + cudaGetErrorString(err));
  }
  return OkStatus();
}

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err != cudaSuccess) return Internal(std::string(what) + ": " + cudaGetErrorString(err));
  return OkStatus();
}

inline Status CheckShapeAndIters(const char* name, int64_t T, int64_t C, int iters) {
  if (T < 0) return InvalidArgument(std::string(name) + ": T must be >= 0");
  if (C < kMhcMinC || C > kMhcMaxC || C % kMhcCAlign != 0) {
    return InvalidArgument(std::string(name) +
                           ": C must be a multiple of 256 in [256, 16384], got " +
                           std::to_string(C));
  }
  if (iters < 1 || iters > kMhcMaxSinkhornIters) {
    return InvalidArgument(std::string(name) + ": sinkhorn_iters must be in [1, 64], got " +
                           std::to_string(iters));
  }
  return OkStatus();
}

// A device pointer the kernels read or write with 16-byte accesses.
inline Status CheckVec(const char* name, const void* p, const char* what) {
  if (p == nullptr) return InvalidArgument(std::string(name) + ": " + what + " is null");
  if (!Aligned(p, 16)) {
    return InvalidArgument(std::string(name) + ": " + what + " must be 16-byte aligned");
  }
  return OkStatus();
}

#define MHC_RETURN_IF_ERROR(expr)                \
  do {                                           \
    ::cakegrad::kernels::Status mhc_st = (expr); \
    if (!mhc_st.ok()) return mhc_st;             \
  } while (0)

}  // namespace cakegrad::kernels::mhc_cuda
