// Device pieces shared by the conv1d forward and backward kernels: BF16 vector I/O, parameter
// loads, document-start marks for a tile, the cu_seqlens check, and the host-side launch
// helpers (vector-width choice, error wrapping).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "aligned.h"
#include "cakegrad/kernels/conv1d.h"
#include "conv1d_traits.h"
#include "cp_async.cuh"
#include "sfu_math.cuh"

namespace cakegrad::kernels::conv1d {

// Raw storage of V consecutive BF16 values: one 16-, 8-, 4- or 2-byte access per thread and
// token.
template <int V>
struct BfVec;
template <>
struct BfVec<8> {
  using Raw = uint4;
};
template <>
struct BfVec<4> {
  using Raw = uint2;
};
template <>
struct BfVec<2> {
  using Raw = uint32_t;
};
template <>
struct BfVec<1> {
  using Raw = uint16_t;
};
template <int V>
using RawT = typename BfVec<V>::Raw;

template <int V>
__device__ __forceinline__ RawT<V> LoadRaw(const uint16_t* p) {
  return __ldg(reinterpret_cast<const RawT<V>*>(p));
}

template <int V>
__device__ __forceinline__ RawT<V> ZeroRaw() {
  if constexpr (V == 8) {
    return make_uint4(0, 0, 0, 0);
  } else if constexpr (V == 4) {
    return make_uint2(0, 0);
  } else {
    return RawT<V>(0);
  }
}

__device__ __forceinline__ float LoBf16(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float HiBf16(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

template <int V>
__device__ __forceinline__ void Unpack(const RawT<V>& r, float (&out)[V]) {
  if constexpr (V == 8) {
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = LoBf16(w[i]);
      out[2 * i + 1] = HiBf16(w[i]);
    }
  } else if constexpr (V == 4) {
    out[0] = LoBf16(r.x);
    out[1] = HiBf16(r.x);
    out[2] = LoBf16(r.y);
    out[3] = HiBf16(r.y);
  } else if constexpr (V == 2) {
    out[0] = LoBf16(r);
    out[1] = HiBf16(r);
  } else {
    out[0] = __uint_as_float(static_cast<uint32_t>(r) << 16);
  }
}

// Two floats to two BF16 (round to nearest even) in one instruction, low element first.
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &h, sizeof(u));
  return u;
}

template <int V>
__device__ __forceinline__ RawT<V> Pack(const float (&v)[V]) {
  if constexpr (V == 8) {
    return make_uint4(PackBf16x2(v[0], v[1]), PackBf16x2(v[2], v[3]), PackBf16x2(v[4], v[5]),
                      PackBf16x2(v[6], v[7]));
  } else if constexpr (V == 4) {
    return make_uint2(PackBf16x2(v[0], v[1]), PackBf16x2(v[2], v[3]));
  } else if constexpr (V == 2) {
    return PackBf16x2(v[0], v[1]);
  } else {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v[0]));
  }
}

template <int V>
__device__ __forceinline__ void StoreRaw(uint16_t* p, const RawT<V>& r) {
  *reinterpret_cast<RawT<V>*>(p) = r;
}

constexpr float kLog2e = 1.44269504088896340736f;

// sigmoid(p) from the SFU: exp's argument rounding (|p| * 2^-24 relative) plus a few ulps.
// For very negative p the exponential overflows to inf and the reciprocal gives 0.
__device__ __forceinline__ float SigmoidFast(float p) {
  return RcpFtz(1.0f + Ex2Ftz(__fmul_rn(p, -kLog2e)));
}

__device__ __forceinline__ float LoadParam(const void* p, DType dtype, int64_t i) {
  if (dtype == DType::kBF16) {
    return __uint_as_float(static_cast<uint32_t>(__ldg(static_cast<const uint16_t*>(p) + i)) << 16);
  }
  return __ldg(static_cast<const float*>(p) + i);
}

// Weights and bias of channels c0 .. c0 + V - 1 (zeros when !run): each channel's four weights
// as one 16-byte load (BF16: 8 bytes) when the pointer allows, not four scalar loads at a
// 64-byte lane stride. Both kernels call it before the document search so that these loads
// overlap its round trips instead of adding one more to each CTA's start.
template <int V>
__device__ __forceinline__ void LoadChannelParams(const void* weight, DType weight_dtype,
                                                  const void* bias, DType bias_dtype, int64_t c0,
                                                  bool run, float (&w)[kConv1dWidth][V],
                                                  float (&b)[V]) {
  const uintptr_t wa = reinterpret_cast<uintptr_t>(weight);
  if (weight_dtype == DType::kFP32 && (wa & 15u) == 0) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float4 q = run ? __ldg(static_cast<const float4*>(weight) + c0 + v)
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      w[0][v] = q.x;
      w[1][v] = q.y;
      w[2][v] = q.z;
      w[3][v] = q.w;
    }
  } else if (weight_dtype == DType::kBF16 && (wa & 7u) == 0) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const uint2 q = run ? __ldg(static_cast<const uint2*>(weight) + c0 + v) : make_uint2(0u, 0u);
      w[0][v] = LoBf16(q.x);
      w[1][v] = HiBf16(q.x);
      w[2][v] = LoBf16(q.y);
      w[3][v] = HiBf16(q.y);
    }
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) {
#pragma unroll
      for (int k = 0; k < kConv1dWidth; ++k) {
        w[k][v] = run ? LoadParam(weight, weight_dtype, (c0 + v) * kConv1dWidth + k) : 0.0f;
      }
    }
  }
#pragma unroll
  for (int v = 0; v < V; ++v) {
    b[v] = run && bias != nullptr ? LoadParam(bias, bias_dtype, c0 + v) : 0.0f;
  }
}

__device__ __forceinline__ int64_t LoadCu(const void* cu, bool cu64, int64_t i) {
  return cu64 ? __ldg(static_cast<const long long*>(cu) + i)
              : static_cast<int64_t>(__ldg(static_cast<const int*>(cu) + i));
}

// Raises kDeviceStatusBadCuSeqlens unless cu[0] == 0, cu is non-decreasing and cu[N] == S. The
// grid shares the scan (one comparison per thread for any realistic N).
__device__ __forceinline__ void CheckCuSeqlens(const void* cu, bool cu64, int64_t num_docs,
                                               int64_t S, uint32_t* status) {
  if (status == nullptr) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool bad = false;
  for (int64_t d = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; d < num_docs;
       d += stride) {
    bad |= LoadCu(cu, cu64, d + 1) < LoadCu(cu, cu64, d);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    bad |= LoadCu(cu, cu64, 0) != 0 || LoadCu(cu, cu64, num_docs) != S;
  }
  if (bad) atomicOr(status, kDeviceStatusBadCuSeqlens);
}

// Sets bit i of `marks` (`words` words, at least (n + 31) / 32) when a document starts at token
// a + i, for i in [0, n). A 257-ary search (one probe per thread and round, so one round for
// N < 257) finds the document holding token a; the threads then walk the following offsets.
// Malformed offsets cannot push an index out of [0, N] or a bit out of [0, n); they only give wrong
// marks, which CheckCuSeqlens reports.
template <int kThreads>
__device__ __forceinline__ void MarkDocStarts(const void* cu, bool cu64, int64_t num_docs,
                                              int64_t a, int64_t n, uint32_t* marks, int words) {
  for (int i = threadIdx.x; i < words; i += kThreads) marks[i] = 0u;
  __syncthreads();
  // Invariant (for valid offsets): the last d with cu[d] <= a lies in [lo, hi).
  int64_t lo = 0, hi = num_docs + 1;
  while (hi - lo > 1) {
    const int64_t step = (hi - lo + kThreads) / (kThreads + 1);
    const int64_t probe = lo + (static_cast<int64_t>(threadIdx.x) + 1) * step;
    const int count = __syncthreads_count(probe < hi && LoadCu(cu, cu64, probe) <= a);
    const int64_t next_hi = lo + (count + 1) * step;
    hi = next_hi < hi ? next_hi : hi;
    lo += count * step;
  }
  for (int64_t d = lo + threadIdx.x; d <= num_docs; d += kThreads) {
    const int64_t v = LoadCu(cu, cu64, d);
    if (v >= a + n) break;
    if (v >= a) atomicOr(&marks[(v - a) >> 5], 1u << ((v - a) & 31));
  }
  __syncthreads();
}

__device__ __forceinline__ uint32_t MarkAt(const uint32_t* marks, int i) {
  return (marks[i >> 5] >> (i & 31)) & 1u;
}

// Whether any bit of marks[lo, lo + n) is set (n >= 1).
__device__ __forceinline__ bool AnyMark(const uint32_t* marks, int lo, int n) {
  const int hi = lo + n - 1;
  bool any = false;
  for (int q = lo >> 5; q <= hi >> 5; ++q) {
    uint32_t bits = marks[q];
    if (q == lo >> 5) bits &= ~0u << (lo & 31);
    if (q == hi >> 5) bits &= ~0u >> (31 - (hi & 31));
    any |= bits != 0u;
  }
  return any;
}

// ---- the prefetch rings ----
//
// A thread's walk consumes one token per step and asks for the token kDepth steps ahead. Two
// ways to keep those tokens in flight:
//  - RegRing: plain loads into registers (costs 4 * kDepth * V / 8 registers per tensor, which
//    bounds the depth at the register budget);
//  - SmemRing: cp.async into this thread's own slots of shared memory, so the depth costs no
//    registers. Each thread reads back only what it copied itself, so cp.async.wait_group is the
//    only synchronization. The ring has kDepth + 4 slots: the slot a step refills was read four
//    steps earlier and its value has been consumed since, so the refill cannot overtake the
//    read.
// Tokens past the end (or before token 0) read as zeros in both.

template <int V, int kDepth>
struct RegRing {
  template <int, int, int>
  using Placed = RegRing;  // no shared memory to place
  static constexpr bool kAsync = false;
  static constexpr int kAhead = kDepth;
  static constexpr int kSlots = kDepth;
  static constexpr int kUnroll = kDepth;  // slot indices become constants
  static_assert(kDepth % 4 == 0, "the walk's window needs steps in groups of 4");
  static constexpr int kSmemBytes = 0;
  RawT<V> r[kSlots];
  __device__ __forceinline__ void Init(void*, int) {}
  __device__ __forceinline__ RawT<V> Get(int s) const { return r[s]; }
  __device__ __forceinline__ void Issue(int s, const uint16_t* src, bool valid, const uint16_t*) {
    r[s] = valid ? LoadRaw<V>(src) : ZeroRaw<V>();
  }
};

// Slot s lies SlotOffset(s) bytes after slot 0: kStride bytes apart (by default the slots are
// adjacent), and kJump bytes further from slot kJumpAt on (a hole for other data in between).
template <int V, int kDepth, int kThreads,
          int kStride = kThreads* static_cast<int>(sizeof(RawT<V>)), int kJumpAt = kDepth + 4,
          int kJump = 0>
struct SmemRing {
  template <int kStride2, int kJumpAt2, int kJump2>
  using Placed = SmemRing<V, kDepth, kThreads, kStride2, kJumpAt2, kJump2>;
  static constexpr bool kAsync = true;
  static constexpr int kAhead = kDepth;
  static constexpr int kSlots = kDepth + 4;
  static constexpr int kUnroll = kSlots;
  static_assert(kDepth % 4 == 0, "the walk's window needs steps in groups of 4");
  static constexpr int kSlotBytes = kThreads * static_cast<int>(sizeof(RawT<V>));
  static constexpr int kSmemBytes = kSlots * kSlotBytes;  // adjacent slots
  static_assert(kStride >= kSlotBytes && kStride % 16 == 0 && kJump % 16 == 0, "bad placement");
  static constexpr int SlotOffset(int s) { return s * kStride + (s >= kJumpAt ? kJump : 0); }
  // slot s of this thread: SlotOffset(s) bytes after base (a warp reads 32 adjacent vectors)
  RawT<V>* base;
  __device__ __forceinline__ void Init(void* ring, int tid) {
    base = static_cast<RawT<V>*>(ring) + tid;
  }
  __device__ __forceinline__ RawT<V>* Slot(int s) const {
    return reinterpret_cast<RawT<V>*>(reinterpret_cast<unsigned char*>(base) + SlotOffset(s));
  }
  __device__ __forceinline__ RawT<V> Get(int s) const { return *Slot(s); }
  __device__ __forceinline__ void Issue(int s, const uint16_t* src, bool valid,
                                        const uint16_t* safe) {
    CpAsyncZfill<sizeof(RawT<V>)>(Slot(s), valid ? src : safe, valid);
  }
};

// Before reading step i's slot: all but the newest kDepth - 1 groups (steps i + 1 .. i + kDepth
// - 1) have landed. One group is committed per step, so the count is uniform. kGroupSteps > 1:
// one group per kGroupSteps steps, and steps i .. i + kGroupSteps - 1 have landed.
template <class Ring, int kGroupSteps = 1>
__device__ __forceinline__ void RingWait() {
  static_assert(Ring::kAhead % kGroupSteps == 0, "the look-ahead is whole groups");
  if constexpr (Ring::kAsync) CpAsyncWait<Ring::kAhead / kGroupSteps - 1>();
}
template <class Ring>
__device__ __forceinline__ void RingCommit() {
  if constexpr (Ring::kAsync) CpAsyncCommit();
}
template <class Ring>
__device__ __forceinline__ void RingDrain() {
  if constexpr (Ring::kAsync) CpAsyncWaitAll();
}

// ---- host side ----

// The widest BF16 vector every row of every activation tensor allows.
inline int ChooseVec(int64_t C, const void* a, const void* b, const void* c) {
  auto all_aligned = [&](int bytes) {
    return Aligned(a, bytes) && Aligned(b, bytes) && Aligned(c, bytes);
  };
  if (C % 8 == 0 && all_aligned(16)) return 8;
  if (C % 4 == 0 && all_aligned(8)) return 4;
  if (C % 2 == 0 && all_aligned(4)) return 2;
  return 1;
}

// Turns the vector width into a template constant; the default branch names the value.
template <typename F>
Status DispatchVec(int vec, F&& f) {
  switch (vec) {
    case 8:
      return f(std::integral_constant<int, 8>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 1:
      return f(std::integral_constant<int, 1>{});
    default:
      return Internal("conv1d: unsupported vector width " + std::to_string(vec));
  }
}

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return OkStatus();
  return Internal(std::string("conv1d: ") + what + ": " + cudaGetErrorString(err));
}

inline bool IsParamDType(DType d) { return d == DType::kFP32 || d == DType::kBF16; }
inline bool IsOffsetDType(DType d) { return d == DType::kINT32 || d == DType::kINT64; }

// Checks shared by forward and backward; the server validated shapes, this guards the launch.
inline Status CheckCommonArgs(int64_t S, int64_t C, int64_t num_docs, const void* x,
                              const void* weight, DType weight_dtype, const void* bias,
                              DType bias_dtype, const void* cu, DType cu_dtype) {
  if (S < 0 || C < 1 || num_docs < 0) {
    return InvalidArgument(
        "conv1d: need S >= 0, C >= 1, num_docs >= 0; got S = " + std::to_string(S) +
        ", C = " + std::to_string(C) + ", num_docs = " + std::to_string(num_docs));
  }
  if (!IsParamDType(weight_dtype) || (bias != nullptr && !IsParamDType(bias_dtype))) {
    return InvalidArgument("conv1d: weight and bias must be float32 or bfloat16");
  }
  if (!IsOffsetDType(cu_dtype)) {
    return InvalidArgument(std::string("conv1d: cu_seqlens must be int32 or int64, got ") +
                           DTypeName(cu_dtype));
  }
  if (S > 0 && (x == nullptr || weight == nullptr || cu == nullptr)) {
    return InvalidArgument("conv1d: x, weight and cu_seqlens must be non-null when S > 0");
  }
  return OkStatus();
}

}  // namespace cakegrad::kernels::conv1d
