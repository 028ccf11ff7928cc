// Tensor-core and fast-exponential helpers shared by the chunked KDA forward
// (kda_chunked_forward.cu) and backward (kda_chunked_backward.cu): BF16 hi / lo splitting,
// mma.sync m16n8k16 fragments and the BF16x3 product, and the ex2-based decay factor. One copy,
// so the two kernels' operand layouts cannot drift apart.
//
// Host emulation (tools/emu): with CAKEGRAD_KDA_HOST_EMU defined (cuda_host_shim.h), the two
// inline-PTX helpers take the shim's emulations, so the kernels' source runs unchanged on the host.
#pragma once

#include <cuda.h>  // CUtensorMap (a kernel parameter: no libcuda link)
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "kda_common.cuh"
#ifndef CAKEGRAD_KDA_HOST_EMU
#include "cluster_sync.cuh"
#endif

namespace cakegrad::kernels::kda_cuda {

// x = hi + lo with hi = bf16(x), lo = bf16(x - hi), for one value.
__device__ __forceinline__ void Split(float x, uint16_t* hi, uint16_t* lo) {
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  *hi = __bfloat16_as_ushort(h);
  *lo = ToBf16(x - __bfloat162float(h));
}

// Two floats rounded to BF16 (nearest even) and packed, x0 in the low half: one paired
// conversion (F2FP), where two scalar conversions and the packing took ~5 instructions and two
// conversion-pipe slots.
__device__ __forceinline__ uint32_t PackBf16x2(float x0, float x1) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  return reinterpret_cast<const uint32_t&>(h);
}
// The halves of a packed BF16 pair widened to FP32 (exact): a shift and a mask.
__device__ __forceinline__ float LowBf16(uint32_t x) { return __uint_as_float(x << 16); }
__device__ __forceinline__ float HighBf16(uint32_t x) { return __uint_as_float(x & 0xffff0000u); }

// Split for a pair, packed as an mma operand register (x0 in the low half): bitwise the values of
// two Split calls, with one paired conversion per part (the splits were the kernels' main use of
// the conversion pipe: ncu showed it the busiest pipe of the chunked backward's per-chunk kernel).
__device__ __forceinline__ void SplitPair(float x0, float x1, uint32_t* hi, uint32_t* lo) {
  const uint32_t h = PackBf16x2(x0, x1);
  *hi = h;
  *lo = PackBf16x2(x0 - LowBf16(h), x1 - HighBf16(h));
}

#ifdef CAKEGRAD_KDA_HOST_EMU
inline void Mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) { EmuMma(d, a, b); }
#else
// D += A B, m16n8k16, BF16 operands, FP32 accumulators.
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

// e^x of a log-gate difference (|x| <= 75 where the result is kept; below, it underflows), as one
// MUFU.EX2 after one multiply: ~2 ulp where expf's accurate path costs ~9 instructions.
__device__ __forceinline__ float DecayExp(float x) { return Ex2Ftz(x * kLog2e); }

// A fragment (16 x 16) of a row-major BF16 matrix with row stride kStride, at (row0, col0).
template <int kStride>
__device__ __forceinline__ void LoadA(const uint16_t* base, int row0, int col0, uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31;
  const uint16_t* p = base + (row0 + (lane >> 2)) * kStride + col0 + 2 * (lane & 3);
  a[0] = *reinterpret_cast<const uint32_t*>(p);
  a[1] = *reinterpret_cast<const uint32_t*>(p + 8 * kStride);
  a[2] = *reinterpret_cast<const uint32_t*>(p + 8);
  a[3] = *reinterpret_cast<const uint32_t*>(p + 8 * kStride + 8);
}

// B fragment (16 x 8) of B = X^T, X row-major [n][k] BF16 with row stride kStride, at (n0, k0).
template <int kStride>
__device__ __forceinline__ void LoadB(const uint16_t* base, int n0, int k0, uint32_t (&b)[2]) {
  const int lane = threadIdx.x & 31;
  const uint16_t* p = base + (n0 + (lane >> 2)) * kStride + k0 + 2 * (lane & 3);
  b[0] = *reinterpret_cast<const uint32_t*>(p);
  b[1] = *reinterpret_cast<const uint32_t*>(p + 8);
}

// LoadA (LdmA, after LdmAP) and a hi / lo pair of LoadB by ldmatrix: the same registers from one
// instruction instead of four (A) or four (B hi + lo) 4-byte shared loads. ncu of the forward
// (kda_h200.md, 2026-11-30) found its kernels issue-bound with the fragment loads a quarter of the
// state pass's instructions. Needs 16-byte aligned rows (kStride and col0 multiples of 8, base
// 16-aligned) and the whole warp converged; under the host emulator they are scalar loads.
#ifdef CAKEGRAD_KDA_HOST_EMU
template <int kStride>
__device__ __forceinline__ void LdmB2(const uint16_t* hi_base, const uint16_t* lo_base, int n0,
                                      int k0, uint32_t (&bh)[2], uint32_t (&bl)[2]) {
  LoadB<kStride>(hi_base, n0, k0, bh);
  LoadB<kStride>(lo_base, n0, k0, bl);
}
#else
// One ldmatrix.x4 (kTrans: .trans) / stmatrix.x4 at this lane's row address p: matrix i takes
// its 8 row addresses from lanes 8 i .. 8 i + 7 and lands in (comes from) register i with
// LoadA's / LoadB's lane layout (lane (g, q) holds row g, columns 2 q, 2 q + 1).
template <bool kTrans>
__device__ __forceinline__ void Ldsm4(const uint16_t* p, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                      uint32_t& r3) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
  }
}
template <bool kTrans>
__device__ __forceinline__ void Stsm4(uint16_t* p, const uint32_t (&r)[4]) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  if constexpr (kTrans) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(s),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
  } else {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(s),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
  }
}
template <int kStride>
__device__ __forceinline__ void LdmB2(const uint16_t* hi_base, const uint16_t* lo_base, int n0,
                                      int k0, uint32_t (&bh)[2], uint32_t (&bl)[2]) {
  static_assert(kStride % 8 == 0, "16-byte rows");
  const int lane = threadIdx.x & 31;
  // Matrices: hi at k0, hi at k0 + 8, lo at k0, lo at k0 + 8.
  Ldsm4<false>(
      (lane < 16 ? hi_base : lo_base) + (n0 + (lane & 7)) * kStride + k0 + 8 * ((lane >> 3) & 1),
      bh[0], bh[1], bl[0], bl[1]);
}
#endif

// LdmB2 with the caller's row pieces: piece(plane, n, q) is the 16-byte piece of plane 0 (hi) or 1
// (lo) holding row n, columns 8 q .. 8 q + 7, so that the caller may swizzle its rows; q0 = k0 / 8.
#ifdef CAKEGRAD_KDA_HOST_EMU
template <class Piece>
__device__ __forceinline__ void LdmB2P(Piece piece, int n0, int q0, uint32_t (&bh)[2],
                                       uint32_t (&bl)[2]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  for (int j = 0; j < 2; ++j) {
    bh[j] = *reinterpret_cast<const uint32_t*>(piece(0, n0 + g, q0 + j) + 2 * q);
    bl[j] = *reinterpret_cast<const uint32_t*>(piece(1, n0 + g, q0 + j) + 2 * q);
  }
}
#else
template <class Piece>
__device__ __forceinline__ void LdmB2P(Piece piece, int n0, int q0, uint32_t (&bh)[2],
                                       uint32_t (&bl)[2]) {
  const int lane = threadIdx.x & 31;
  Ldsm4<false>(piece(lane >> 4, n0 + (lane & 7), q0 + ((lane >> 3) & 1)), bh[0], bh[1], bl[0],
               bl[1]);
}
#endif

// One plane of LdmB2P: piece(n, q) is the 16-byte piece holding row n, columns 8 q .. 8 q + 7.
#ifdef CAKEGRAD_KDA_HOST_EMU
template <class Piece>
__device__ __forceinline__ void LdmBP(Piece piece, int n0, int q0, uint32_t (&b)[2]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  for (int j = 0; j < 2; ++j) {
    b[j] = *reinterpret_cast<const uint32_t*>(piece(n0 + g, q0 + j) + 2 * q);
  }
}
#else
template <class Piece>
__device__ __forceinline__ void LdmBP(Piece piece, int n0, int q0, uint32_t (&b)[2]) {
  const int lane = threadIdx.x & 31;
  // ldmatrix.x2: lanes 0 .. 15 give the row addresses (the others' are not read).
  const uint32_t s = static_cast<uint32_t>(
      __cvta_generic_to_shared(piece(n0 + (lane & 7), q0 + ((lane >> 3) & 1))));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(s));
}
#endif

// LdmA for a 16 x 16 A tile stored in pieces: piece(r, q) is the 16-byte piece holding row r,
// columns 8 q .. 8 q + 7, so that the caller may pack and swizzle its tiles. Same registers as
// LdmA (LoadA's layout).
#ifdef CAKEGRAD_KDA_HOST_EMU
template <class Piece>
__device__ __forceinline__ void LdmAP(Piece piece, uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  for (int i = 0; i < 4; ++i) {
    const uint16_t* p = piece(g + 8 * (i & 1), i >> 1) + 2 * q;
    a[i] = uint32_t(p[0]) | (uint32_t(p[1]) << 16);
  }
}
#else
template <class Piece>
__device__ __forceinline__ void LdmAP(Piece piece, uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31;
  Ldsm4<false>(piece(lane & 15, lane >> 4), a[0], a[1], a[2], a[3]);
}
#endif

// LoadA's A tile at rows row0 .., columns col0 .. of a row-major BF16 buffer, by LdmAP.
template <int kStride>
__device__ __forceinline__ void LdmA(const uint16_t* base, int row0, int col0, uint32_t (&a)[4]) {
  static_assert(kStride % 8 == 0, "16-byte rows");
  LdmAP([&](int r, int q) { return base + (row0 + r) * kStride + col0 + 8 * q; }, a);
}

// B fragments (16 x 8) of two n-tiles of a row-major BF16 B[k][n] (B itself, not its transpose),
// at k0 and columns n0 .. n0 + 15: b0 for n0, b1 for n0 + 8, LoadB's layout (lane (g, q) holds
// B[k0 + 2 q, + 1][n + g] and B[k0 + 2 q + 8, + 9][n + g]). piece(k, j) is the 16-byte row piece
// holding B[k][8 j .. 8 j + 7], so that the caller may swizzle its rows. ldmatrix.x4.trans: one
// instruction, the same 16-byte alignment rules as LdmA.
#ifdef CAKEGRAD_KDA_HOST_EMU
template <class Piece>
__device__ __forceinline__ void LdmBT4(Piece piece, int k0, int n0, uint32_t (&b0)[2],
                                       uint32_t (&b1)[2]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  auto at = [&](int k, int n) { return uint32_t(piece(k, n / 8)[n % 8]); };
  for (int h = 0; h < 2; ++h) {
    const int k = k0 + 8 * h + 2 * q;
    b0[h] = at(k, n0 + g) | (at(k + 1, n0 + g) << 16);
    b1[h] = at(k, n0 + 8 + g) | (at(k + 1, n0 + 8 + g) << 16);
  }
}
#else
// Matrices: k rows 0-7 / 8-15 at n0 (b0[0], b0[1]), then at n0 + 8 (b1[0], b1[1]); transposed,
// lane (g, q) receives rows 2 q, 2 q + 1 of column g of each.
template <class Piece>
__device__ __forceinline__ void LdmBT4(Piece piece, int k0, int n0, uint32_t (&b0)[2],
                                       uint32_t (&b1)[2]) {
  const int lane = threadIdx.x & 31;
  Ldsm4<true>(piece(k0 + (lane & 15), n0 / 8 + (lane >> 4)), b0[0], b0[1], b1[0], b1[1]);
}
#endif

// LdmAP's A tile (16 x 16) of A = X^T, X a row-major BF16 [k][m] stored in pieces: piece(k, q) is
// the 16-byte piece of X's row k holding columns 8 q .. 8 q + 7; the tile at k0, m0 (multiples of
// 8). ldmatrix.x4.trans: matrix i is X's rows k0 + 8 (i >> 1) .. at column m0 + 8 (i & 1).
#ifdef CAKEGRAD_KDA_HOST_EMU
template <class Piece>
__device__ __forceinline__ void LdmATP(Piece piece, int k0, int m0, uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  auto at = [&](int k, int m) { return uint32_t(piece(k, m / 8)[m % 8]); };
  for (int i = 0; i < 4; ++i) {
    const int k = k0 + 8 * (i >> 1) + 2 * q, m = m0 + 8 * (i & 1) + g;
    a[i] = at(k, m) | (at(k + 1, m) << 16);
  }
}
#else
template <class Piece>
__device__ __forceinline__ void LdmATP(Piece piece, int k0, int m0, uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31;
  Ldsm4<true>(piece(k0 + (lane & 7) + 8 * (lane >> 4), m0 / 8 + ((lane >> 3) & 1)), a[0], a[1],
              a[2], a[3]);
}
#endif

// Stores of four 8 x 8 BF16 tiles held in the accumulator layout (lane (g, q) holds row g,
// columns 2 q, 2 q + 1 of tile i as the BF16 pair r[i]), by stmatrix: one instruction where the
// scalar form takes four 4-byte stores (Stm4) or eight 2-byte ones (StmT4). Same 16-byte row
// rules as LdmA. Stm4 writes tile i at rows row0 + 8 (i & 1), columns col0 + 8 (i >> 1) (LoadA's
// register order); StmT4 writes tile i transposed, its column j to row row0 + 8 (i >> 1) + j,
// columns col0 + 8 (i & 1) + g.
#ifdef CAKEGRAD_KDA_HOST_EMU
template <int kStride>
__device__ __forceinline__ void Stm4(uint16_t* base, int row0, int col0, const uint32_t (&r)[4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  for (int i = 0; i < 4; ++i) {
    *reinterpret_cast<uint32_t*>(base + (row0 + 8 * (i & 1) + g) * kStride + col0 + 8 * (i >> 1) +
                                 2 * q) = r[i];
  }
}
template <int kStride>
__device__ __forceinline__ void StmT4(uint16_t* base, int row0, int col0, const uint32_t (&r)[4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      base[(row0 + 8 * (i >> 1) + 2 * q + j) * kStride + col0 + 8 * (i & 1) + g] =
          static_cast<uint16_t>(r[i] >> (16 * j));
    }
  }
}
#else
template <int kStride>
__device__ __forceinline__ void Stm4(uint16_t* base, int row0, int col0, const uint32_t (&r)[4]) {
  static_assert(kStride % 8 == 0, "16-byte rows");
  const int lane = threadIdx.x & 31;
  Stsm4<false>(base + (row0 + (lane & 15)) * kStride + col0 + 8 * (lane >> 4), r);
}
template <int kStride>
__device__ __forceinline__ void StmT4(uint16_t* base, int row0, int col0, const uint32_t (&r)[4]) {
  static_assert(kStride % 8 == 0, "16-byte rows");
  const int lane = threadIdx.x & 31;
  Stsm4<true>(base + (row0 + 8 * (lane >> 4) + (lane & 7)) * kStride + col0 + 8 * ((lane >> 3) & 1),
              r);
}
#endif

// A warp's 16 x 32 tile of an FP32 state (row-major, row stride kDim) held in the accumulator
// layout of four 8-column n-tiles, as the chunked passes keep their state slices in registers:
// lane (g, q) holds rows g and g + 8, columns 8 nt + 2 q, + 1. `tile` points at the tile's first
// row and column. Loaded (zeros for a null tile), written back, or split into hi / lo planes of
// shared memory (BF16 rows of kStride) at (row0, col0), two column tiles per stmatrix.
__device__ __forceinline__ void LoadStateTile(const float* tile, float (&st)[4][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    float2 x = make_float2(0.f, 0.f), y = make_float2(0.f, 0.f);
    if (tile != nullptr) {
      x = *reinterpret_cast<const float2*>(tile + g * kDim + 8 * nt + 2 * q);
      y = *reinterpret_cast<const float2*>(tile + (g + 8) * kDim + 8 * nt + 2 * q);
    }
    st[nt][0] = x.x;
    st[nt][1] = x.y;
    st[nt][2] = y.x;
    st[nt][3] = y.y;
  }
}
__device__ __forceinline__ void WriteStateTile(float* tile, const float (&st)[4][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    *reinterpret_cast<float2*>(tile + g * kDim + 8 * nt + 2 * q) =
        make_float2(st[nt][0], st[nt][1]);
    *reinterpret_cast<float2*>(tile + (g + 8) * kDim + 8 * nt + 2 * q) =
        make_float2(st[nt][2], st[nt][3]);
  }
}
template <int kStride>
__device__ __forceinline__ void StoreStateTileSplit(uint16_t* hi_base, uint16_t* lo_base, int row0,
                                                    int col0, const float (&st)[4][4]) {
#pragma unroll
  for (int np = 0; np < 2; ++np) {
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int nt = 2 * np + (i >> 1), hh = i & 1;
      SplitPair(st[nt][2 * hh], st[nt][2 * hh + 1], &hi[i], &lo[i]);
    }
    Stm4<kStride>(hi_base, row0, col0 + 16 * np, hi);
    Stm4<kStride>(lo_base, row0, col0 + 16 * np, lo);
  }
}

// B fragment (16 x 8) of a row-major FP32 matrix B[k][n] (row stride ld floats) at (k0, n0), split
// into BF16 hi and lo parts: lane (g, q) reads rows k0 + 2q, + 1, + 8, + 9 of column n0 + g.
__device__ __forceinline__ void LoadBSplit(const float* base, int ld, int k0, int n0,
                                           uint32_t (&hi)[2], uint32_t (&lo)[2]) {
  const int lane = threadIdx.x & 31;
  const float* p = base + (k0 + 2 * (lane & 3)) * ld + n0 + (lane >> 2);
  SplitPair(p[0], p[ld], &hi[0], &lo[0]);
  SplitPair(p[8 * ld], p[9 * ld], &hi[1], &lo[1]);
}

// B fragment (16 x 8) of B = X^T, X row-major FP32 [n][k] (row stride ld floats) at (n0, k0),
// split into BF16 hi and lo parts: lane (g, q) reads X[n0 + g][k0 + 2q, + 1, + 8, + 9].
__device__ __forceinline__ void LoadBSplitT(const float* base, int ld, int n0, int k0,
                                            uint32_t (&hi)[2], uint32_t (&lo)[2]) {
  const int lane = threadIdx.x & 31;
  const float* p = base + (n0 + (lane >> 2)) * ld + k0 + 2 * (lane & 3);
  const float2 x0 = *reinterpret_cast<const float2*>(p);
  const float2 x1 = *reinterpret_cast<const float2*>(p + 8);
  SplitPair(x0.x, x0.y, &hi[0], &lo[0]);
  SplitPair(x1.x, x1.y, &hi[1], &lo[1]);
}

// x = hi + mid + lo in three BF16 parts (24 significant bits: FP32 up to the last bit or so),
// for a pair packed as mma operand registers (x0 in the low halves).
// Three paired conversions (bitwise the values of the earlier ten scalar ones: rounding an
// already-BF16 value again was exact).
__device__ __forceinline__ void Split3Pair(float x0, float x1, uint32_t* hi, uint32_t* mid,
                                           uint32_t* lo) {
  const uint32_t h = PackBf16x2(x0, x1);
  const float r0 = x0 - LowBf16(h), r1 = x1 - HighBf16(h);  // exact
  const uint32_t m = PackBf16x2(r0, r1);
  *hi = h;
  *mid = m;
  // r - m exact; its BF16 rounding is the split's only loss
  *lo = PackBf16x2(r0 - LowBf16(m), r1 - HighBf16(m));
}

// A fragment (16 x 16) of a row-major FP32 matrix (row stride ld floats) at (row0, col0), split
// into three BF16 parts on the fly (Split3Pair): hi and mid are exactly SplitPair's hi and lo, so
// one load serves a BF16x3 and a BF16x6 product alike.
__device__ __forceinline__ void LoadASplit3(const float* base, int ld, int row0, int col0,
                                            uint32_t (&hi)[4], uint32_t (&mid)[4],
                                            uint32_t (&lo)[4]) {
  const int lane = threadIdx.x & 31;
  const float* p = base + (row0 + (lane >> 2)) * ld + col0 + 2 * (lane & 3);
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float2 x = *reinterpret_cast<const float2*>(p + 8 * ld * (r & 1) + 8 * (r >> 1));
    Split3Pair(x.x, x.y, &hi[r], &mid[r], &lo[r]);
  }
}

// The loads of LoadBSplitT / LoadBSplit alone, and the splits alone, so that a loop can load the
// next step's operands from L2 before this step's products (software prefetch): x[0 .. 3] are the
// values LoadBSplitT (LoadBSplit) reads, in the order they pair into the two registers.
__device__ __forceinline__ void LoadBRawT(const float* base, int ld, int n0, int k0,
                                          float (&x)[4]) {
  const int lane = threadIdx.x & 31;
  const float* p = base + (n0 + (lane >> 2)) * ld + k0 + 2 * (lane & 3);
  const float2 x0 = *reinterpret_cast<const float2*>(p);
  const float2 x1 = *reinterpret_cast<const float2*>(p + 8);
  x[0] = x0.x;
  x[1] = x0.y;
  x[2] = x1.x;
  x[3] = x1.y;
}
__device__ __forceinline__ void LoadBRaw(const float* base, int ld, int k0, int n0, float (&x)[4]) {
  const int lane = threadIdx.x & 31;
  const float* p = base + (k0 + 2 * (lane & 3)) * ld + n0 + (lane >> 2);
  x[0] = p[0];
  x[1] = p[ld];
  x[2] = p[8 * ld];
  x[3] = p[9 * ld];
}
__device__ __forceinline__ void SplitB(const float (&x)[4], uint32_t (&hi)[2], uint32_t (&lo)[2]) {
  SplitPair(x[0], x[1], &hi[0], &lo[0]);
  SplitPair(x[2], x[3], &hi[1], &lo[1]);
}
__device__ __forceinline__ void SplitB3(const float (&x)[4], uint32_t (&hi)[2], uint32_t (&mid)[2],
                                        uint32_t (&lo)[2]) {
  Split3Pair(x[0], x[1], &hi[0], &mid[0], &lo[0]);
  Split3Pair(x[2], x[3], &hi[1], &mid[1], &lo[1]);
}

// The 16-byte piece q of row r of a record tile (128 rows of 64 BF16) in shared memory, as the
// TMA's 128-byte swizzle lays it out (piece q at q ^ (r % 8)): the tiles' ldmatrix rows fall in
// distinct banks without padding. The plain (cp.async) instances store their tiles the same way.
// kLd: the row stride in elements where the plain instances pad a tile's rows (64: unpadded).
template <int kLd = 64, class T>
__device__ __forceinline__ T* Swz128(T* tile, int r, int q) {
  return tile + r * kLd + 8 * (q ^ (r & 7));
}

// ---- 2-CTA clusters: mbarriers and multicast copies (the state pass, every width) -------------
// The two CTAs of a cluster each copy half of a chunk record's shared operands into both CTAs'
// shared memory (TMA tiles and bulk copies, .multicast::cluster: L2 serves each byte once for the
// two), completing on a "full" mbarrier at the same offset in each CTA; a CTA refills a buffer
// only after its peer has arrived on its "empty" mbarrier for it. Under the host emulator (no
// clusters, blocks one after another) the barriers are no-ops and a copy a plain (for tiles:
// swizzled) copy into the emulated CTA's own shared memory.
#ifdef CAKEGRAD_KDA_HOST_EMU
inline uint32_t ClusterCtaRank() { return 0; }
inline void ClusterSync() {}
inline void MbarInit(uint64_t*, uint32_t) {}
inline void MbarInitFence() {}
inline void MbarArriveExpectTx(uint64_t*, uint32_t) {}
inline void MbarWait(uint64_t*, uint32_t) {}
inline void MbarArrivePeer(uint64_t*, uint32_t) {}
inline void BulkMulticast(void* smem, const void* gmem, uint32_t bytes, uint64_t*, uint16_t) {
  std::memcpy(smem, gmem, bytes);
}
inline unsigned char* AlignSmem1024(unsigned char* p) { return p; }
// TmaTileMulticast's copy: 128 rows of 128 bytes from emu_src (rows emu_row_bytes apart), the
// 16-byte piece j of row r to piece j ^ (r % 8) (the 128-byte swizzle, rows relative to the tile).
inline void TmaTileMulticast(uint16_t* smem, const CUtensorMap*, int, int, int, uint64_t*, uint16_t,
                             const char* emu_src, int emu_row_bytes) {
  for (int r = 0; r < 128; ++r) {
    for (int j = 0; j < 8; ++j) {
      std::memcpy(Swz128(smem, r, j), emu_src + int64_t{r} * emu_row_bytes + 16 * j, 16);
    }
  }
}
#else
// One arrival on the mbarrier at bar's offset in the cluster's CTA `rank`: this thread's earlier
// shared reads, and those ordered before it by a CTA barrier, are done. The default .release.cta
// semantics, as CUTLASS's ClusterBarrier::arrive for a consumer's release of a multicast buffer
// (a read-before-write hand-over: the peer's copies only overwrite what was read); the
// .release.cluster form compiled to a fence (MEMBAR) before the arrival.
__device__ __forceinline__ void MbarArrivePeer(uint64_t* bar, uint32_t rank) {
  asm volatile(
      "{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(SmemAddr(bar)),
      "r"(rank)
      : "memory");
}
// p rounded up to a multiple of 1024 bytes in the shared window (the 128-byte swizzle's pattern
// repeats every 1024 bytes of address: its tiles must start there).
__device__ __forceinline__ unsigned char* AlignSmem1024(unsigned char* p) {
  return p + ((1024u - (SmemAddr(p) & 1023u)) & 1023u);
}
// One tile of a tiled tensor map with 128-byte swizzle and boxes of 64 BF16 x 128 rows x 1 (16 KB)
// at coordinates (x, y, z), into smem (1024-byte aligned) of every CTA of `mask`, completing on
// the mbarrier at bar's offset there. emu_src / emu_row_bytes: the host emulator's copy only.
__device__ __forceinline__ void TmaTileMulticast(uint16_t* smem, const CUtensorMap* map, int x,
                                                 int y, int z, uint64_t* bar, uint16_t mask,
                                                 const char*, int) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(SmemAddr(smem)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(SmemAddr(bar)), "h"(mask)
      : "memory");
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory to smem's offset
// in every CTA of `mask`, each completing `bytes` on the mbarrier at bar's offset there.
__device__ __forceinline__ void BulkMulticast(void* smem, const void* gmem, uint32_t bytes,
                                              uint64_t* bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1], %2, [%3], %4;\n" ::"r"(SmemAddr(smem)),
      "l"(gmem), "r"(bytes), "r"(SmemAddr(bar)), "h"(mask)
      : "memory");
}
#endif

// BF16x3 product: (acc, acc1, acc2) += (a_hi b_hi, a_hi b_lo, a_lo b_hi).
__device__ __forceinline__ void Mma3(float (&acc)[4], float (&acc1)[4], float (&acc2)[4],
                                     const uint32_t (&ahi)[4], const uint32_t (&alo)[4],
                                     const uint32_t (&bhi)[2], const uint32_t (&blo)[2]) {
  Mma(acc, ahi, bhi);
  Mma(acc1, ahi, blo);
  Mma(acc2, alo, bhi);
}

// "BF16x6" product, acc += A B with both operands split in three BF16 parts: the six partial
// products down to 2^-16 relative of the largest (hi hi), small ones first; the dropped ones
// (mid lo, lo mid, lo lo) are below 2^-24. About FP32-exact products for the classes the study
// found to need 3xTF32 or FP32 (the decayed pair terms).
__device__ __forceinline__ void Mma6(float (&acc)[4], const uint32_t (&ah)[4],
                                     const uint32_t (&am)[4], const uint32_t (&al)[4],
                                     const uint32_t (&bh)[2], const uint32_t (&bm)[2],
                                     const uint32_t (&bl)[2]) {
  Mma(acc, al, bh);
  Mma(acc, ah, bl);
  Mma(acc, am, bm);
  Mma(acc, am, bh);
  Mma(acc, ah, bm);
  Mma(acc, ah, bh);
}

}  // namespace cakegrad::kernels::kda_cuda
