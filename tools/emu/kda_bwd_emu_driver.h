// What the host drivers of the chunked KDA backward's emulation share
// (kda_chunked_backward_emu.cc, kda_dalog_repeat_emu.cc): the inputs as the kernels read them,
// the records and chunk-start states (from the emulated launch 1, or built in FP64), and
// kernels 2-4. Include after the kernels (kern_emu.inc) and the FP64 chunk math (prep.inc in
// namespace kda_ref).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kda_emu_bf16.h"

// EMU_EXACT_S0=records32: a forward copy (FWD_KERNEL) may write the preparation's FP32 -W and
// Kdec^T, before their hi + lo split, here ((slot H + h) 16384 floats: -W [t][k], then Kdec^T
// [k][t]), so that the FP64 state pass can run over them instead of the stored parts.
extern "C" {
float* g_emu_side = nullptr;
}

namespace kda_emu {

namespace K = cakegrad::kernels;
namespace R = cakegrad::kernels::kda_ref;
namespace L = cakegrad::kernels::kda_layout;

// The inputs in the dtypes the kernels read (host memory standing in for device memory).
struct Inputs {
  std::vector<uint16_t> q, k, v, g, beta, d_o;
  std::vector<float> A_log, dt_bias, dfinal, s0;
  std::vector<int64_t> cu;
};

inline Inputs MakeInputs(const R::Problem& p, const std::vector<double>& d_o,
                         const std::vector<double>& dfinal) {
  auto bf = [](const std::vector<double>& x) {
    std::vector<uint16_t> o(x.size());
    for (size_t i = 0; i < x.size(); ++i) o[i] = ToBf(float(x[i]));
    return o;
  };
  auto f32 = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  return {bf(p.q),      bf(p.k),        bf(p.v),     bf(p.g),   bf(p.beta), bf(d_o),
          f32(p.A_log), f32(p.dt_bias), f32(dfinal), f32(p.s0), p.cu};
}

// B > 1: B documents of T tokens without cu_seqlens; B == 1: the packed documents of in.cu.
inline K::kda_cuda::KdaShape MakeShape(const R::Problem& p, const Inputs& in, int64_t B,
                                       int64_t T) {
  K::kda_cuda::KdaShape s{};
  s.cu_seqlens = B > 1 ? nullptr : in.cu.data();
  s.is_int64 = 1;
  s.T = B > 1 ? T : p.total_tokens;
  s.total_tokens = p.total_tokens;
  s.H = p.H;
  s.N = static_cast<int64_t>(in.cu.size()) - 1;
  s.scale = float(p.scale);
  s.lower_bound = float(p.lower_bound);
  return s;
}

// Records and chunk-start states into the workspace: from the emulated launch 1 (`use_kernels`),
// or from the FP64 chunk math (R::Prepare) stored as the records store them.
// EMU_EXACT_DS1=1 (not with EMU_EXACT_S0=records): the reverse chain's dS1 replaced by the FP64
// chain (R::ReverseStep) of the FP64 chunk quantities before the per-chunk pass runs, so that the
// chain's arithmetic can be told from the per-chunk pass's. Filled by FillRecords, used by
// RunBackwardKernels.
inline std::vector<float> g_exact_ds1;
// The emulated checkpoint state pass (16-row slices: 8 CTAs a slot) counted every chunk slot into
// the workspace's slot counters, which FillRecords checked: the reverse chain then counts too,
// and the per-chunk pass goes by them as on the device (b.ready), its wait passing at once.
inline bool g_emu_slots_counted = false;
constexpr unsigned kEmuStateSlices = 128 / 16;

// Exits unless every chunk slot's counter holds `per_slot` and every other (gap) slot's zero.
template <class In>
inline void ExpectSlotCounts(const In& in, int64_t N, int64_t H, int64_t slots,
                             const unsigned* ready, unsigned per_slot, const char* after) {
  std::vector<unsigned> want(slots * H, 0u);
  for (int64_t d = 0; d < N; ++d) {
    const int64_t bos = in.cu[d], chunks = (in.cu[d + 1] - bos + 63) / 64;
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t h = 0; h < H; ++h) want[(bos / 64 + d + c) * H + h] = per_slot;
  }
  for (int64_t e = 0; e < slots * H; ++e) {
    if (ready[e] != want[e]) {
      std::fprintf(stderr, "after %s: slot counter of slot %lld, head %lld: %u, want %u\n", after,
                   static_cast<long long>(e / H), static_cast<long long>(e % H), ready[e], want[e]);
      std::exit(1);
    }
  }
}

// EMU_S0_ARITH=3 or 6 (with EMU_EXACT_S0=records or records32): the state step with the state
// pass's operand splits emulated in FP64: S0 and U rounded to FP32, then split in BF16 parts, and
// each product keeping the BF16x3 (hi hi, hi lo, lo hi of two-part operands) or BF16x6 (three-part
// operands, the six largest partial products) terms; -W, Kdec^T, Uv, Gam_C as given.
using Parts = std::array<double, 3>;
inline Parts SplitParts(double x) {
  const float f = static_cast<float>(x);
  Parts p;
  p[0] = FromBf(ToBf(f));
  p[1] = FromBf(ToBf(f - static_cast<float>(p[0])));
  p[2] = FromBf(ToBf(f - static_cast<float>(p[0]) - static_cast<float>(p[1])));
  return p;
}
inline double SplitProduct(const Parts& a, const Parts& b, int arith) {
  double r = a[0] * b[0] + a[0] * b[1] + a[1] * b[0];
  if (arith == 6) r += a[0] * b[2] + a[1] * b[1] + a[2] * b[0];
  return r;
}
inline std::vector<double> EmulatedStateStep(const R::Chunk& k, const std::vector<double>& S,
                                             int arith) {
  constexpr int C = 64, D = 128;
  // EMU_S0_ARITH_W: U's product -W S0^T in another precision than S1's U^T Kdec.
  const char* aw = std::getenv("EMU_S0_ARITH_W");
  const int arith_w = aw ? std::atoi(aw) : arith;
  std::vector<Parts> sp(D * D), wp(C * D), kp(C * D), up(C * D);
  for (int e = 0; e < D * D; ++e) sp[e] = SplitParts(S[e]);
  for (int e = 0; e < C * D; ++e) {
    wp[e] = SplitParts(k.W[e]);
    kp[e] = SplitParts(k.Kdec[e]);
  }
  for (int t = 0; t < C; ++t)
    for (int v = 0; v < D; ++v) {
      double u = k.Uv[t * D + v];
      for (int kk = 0; kk < D; ++kk) u -= SplitProduct(wp[t * D + kk], sp[v * D + kk], arith_w);
      up[t * D + v] = SplitParts(u);
    }
  std::vector<double> S1(D * D);
  for (int v = 0; v < D; ++v)
    for (int kk = 0; kk < D; ++kk) {
      double x = double(float(S[v * D + kk])) * k.gc[kk];
      for (int t = 0; t < C; ++t) x += SplitProduct(up[t * D + v], kp[t * D + kk], arith);
      S1[v * D + kk] = x;
    }
  return S1;
}

inline void FillRecords(const R::Problem& p, const std::vector<double>& d_o, const Inputs& in,
                        const K::kda_cuda::KdaShape& s, bool with_init, bool use_kernels,
                        const L::ChunkBwdLayout& lay, char* wsp) {
  const int64_t H = p.H, N = s.N;
  // EMU_EXACT_S0=1: the emulated preparation's records, with the chunk-start states of the FP64
  // chunk recurrence below in place of the emulated state pass's. EMU_EXACT_S0=records: the
  // recurrence in FP64 over the records as stored (-W and Kdec^T as hi + lo, Uv and Gam_C FP32),
  // i.e. an exact state pass on today's records.
  const char* exact_s0 = use_kernels ? std::getenv("EMU_EXACT_S0") : nullptr;
  const bool from_records32 = exact_s0 != nullptr && std::strcmp(exact_s0, "records32") == 0;
  const bool from_records =
      exact_s0 != nullptr && (std::strcmp(exact_s0, "records") == 0 || from_records32);
  std::vector<float> side(from_records32 ? L::ChunkSlots(s.total_tokens, N) * H * 16384 : 0, NAN);
  g_emu_side = from_records32 ? side.data() : nullptr;
  if (use_kernels) {
    K::kda_cuda::FwdArgs f{};
    f.s = s;
    f.q = in.q.data();
    f.k = in.k.data();
    f.v = in.v.data();
    f.g = in.g.data();
    f.beta = in.beta.data();
    f.A_log = in.A_log.data();
    f.dt_bias = in.dt_bias.data();
    f.initial_state = with_init ? in.s0.data() : nullptr;
    f.checkpoints = reinterpret_cast<float*>(wsp + lay.s0);
    f.chunk_p = reinterpret_cast<float*>(wsp + lay.p);
    f.chunk_tinv = reinterpret_cast<float*>(wsp + lay.tinv);
    f.chunk_u = reinterpret_cast<float*>(wsp + lay.u);
    f.chunk_kdt3 = reinterpret_cast<uint16_t*>(wsp + lay.kdt3);
    const int64_t slots = L::ChunkSlots(s.total_tokens, N);
    unsigned* const ready = reinterpret_cast<unsigned*>(wsp + lay.ready);
    std::fill(ready, ready + slots * H, 0u);
    f.ready = ready;
    K::kda_cuda::EmuChunkedForwardCheckpoints(f, wsp + lay.records);
    ExpectSlotCounts(in, N, H, slots, ready, kEmuStateSlices, "the state pass");
    g_emu_slots_counted = exact_s0 == nullptr;
    if (exact_s0 == nullptr) return;
  }
  g_emu_slots_counted = false;
  const bool exact_ds1 = std::getenv("EMU_EXACT_DS1") != nullptr && !from_records;
  g_exact_ds1.assign(exact_ds1 ? L::ChunkSlots(s.total_tokens, N) * H * 16384 : 0, 0.f);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t d = 0; d < N; ++d) {
      const int64_t bos = in.cu[d], eos = in.cu[d + 1];
      const int64_t chunks = (eos - bos + 63) / 64;
      std::vector<R::Chunk> kept;
      std::vector<double> S(128 * 128, 0.0);
      if (with_init)
        for (int e = 0; e < 128 * 128; ++e) S[e] = p.s0[(d * H + h) * 16384 + e];
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t t0 = bos + c * 64, slot = bos / 64 + d + c;
        char* rec = wsp + lay.records + (slot * H + h) * L::kRecBytes;
        uint16_t* negw = reinterpret_cast<uint16_t*>(rec + L::kRecNegW);
        uint16_t* qg = reinterpret_cast<uint16_t*>(rec + L::kRecQg);
        uint16_t* kdt = reinterpret_cast<uint16_t*>(rec + L::kRecKdecT);
        uint16_t* m = reinterpret_cast<uint16_t*>(rec + L::kRecM);
        float* uv = reinterpret_cast<float*>(rec + L::kRecUv);
        float* gamc = reinterpret_cast<float*>(rec + L::kRecGamC);
        R::Chunk ch;
        if (from_records) {  // the state pass's operands joined back from the stored record
          ch.W.resize(64 * 128);
          ch.Kdec.resize(64 * 128);
          ch.Uv.resize(64 * 128);
          // EMU_S0_SIDE_ONLY=w or kdec: only that operand from the FP32 side channel.
          const char* only = std::getenv("EMU_S0_SIDE_ONLY");
          const float* sd = from_records32 ? &side[(slot * H + h) * 16384] : nullptr;
          for (int t = 0; t < 64; ++t)
            for (int kk = 0; kk < 128; ++kk) {
              ch.W[t * 128 + kk] = sd && (!only || std::strcmp(only, "w") == 0)
                                       ? -double(sd[t * 128 + kk])
                                       : -(double(FromBf(negw[t * 128 + kk])) +
                                           double(FromBf(negw[8192 + t * 128 + kk])));
              ch.Kdec[t * 128 + kk] =
                  sd && (!only || std::strcmp(only, "kdec") == 0)
                      ? double(sd[8192 + kk * 64 + t])
                      : double(FromBf(kdt[kk * 64 + t])) + double(FromBf(kdt[8192 + kk * 64 + t]));
              ch.Uv[t * 128 + kk] = uv[t * 128 + kk];
            }
          ch.gc.assign(gamc, gamc + 128);
          // EMU_S0_FP64_PARTS (any of "w", "kdec", "uv", "gc"): those operands of the state pass
          // from the FP64 chunk math instead, to tell which record operand limits S0.
          if (const char* parts = std::getenv("EMU_S0_FP64_PARTS")) {
            const R::Chunk x = R::Prepare(p, d_o, t0, int(std::min<int64_t>(64, eos - t0)), h);
            if (std::strstr(parts, "w")) ch.W = x.W;
            if (std::strstr(parts, "kdec")) ch.Kdec = x.Kdec;
            if (std::strstr(parts, "uv")) ch.Uv = x.Uv;
            if (std::strstr(parts, "gc")) ch.gc = x.gc;
          }
        } else {
          ch = R::Prepare(p, d_o, t0, int(std::min<int64_t>(64, eos - t0)), h);
        }
        if (!use_kernels) {  // the records from the FP64 chunk math, stored as the kernel stores
                             // them
          for (int t = 0; t < 64; ++t)
            for (int kk = 0; kk < 128; ++kk) {
              SplitTo(-ch.W[t * 128 + kk], &negw[t * 128 + kk], &negw[8192 + t * 128 + kk]);
              SplitTo(ch.QG[t * 128 + kk], &qg[t * 128 + kk], &qg[8192 + t * 128 + kk]);
              SplitTo(ch.Kdec[t * 128 + kk], &kdt[kk * 64 + t], &kdt[8192 + kk * 64 + t]);
              uv[t * 128 + kk] = float(ch.Uv[t * 128 + kk]);
            }
          for (int t = 0; t < 64; ++t)
            for (int i = 0; i < 64; ++i)
              SplitTo(ch.M[t * 64 + i], &m[t * 64 + i], &m[4096 + t * 64 + i]);
          for (int kk = 0; kk < 128; ++kk) gamc[kk] = float(ch.gc[kk]);
          // P packed by sub-chunk (kda_layout::kChunkPFloats), as the preparation stores it.
          float* pp = reinterpret_cast<float*>(wsp + lay.p) + (slot * H + h) * L::kChunkPFloats;
          for (int t = 0, e = 0; t < 64; ++t)
            for (int i = 0; i < 16 * (t / 16 + 1); ++i)
              pp[e++] = i < t ? float(ch.P[t * 64 + i]) : 0.f;
          float* tv = reinterpret_cast<float*>(wsp + lay.tinv) + (slot * H + h) * L::kChunkPFloats;
          for (int t = 0, e = 0; t < 64; ++t)
            for (int i = 0; i < 16 * (t / 16 + 1); ++i) tv[e++] = float(ch.Tinv[t * 64 + i]);
        }
        float* s0c = reinterpret_cast<float*>(wsp + lay.s0) + (slot * H + h) * 16384;
        for (int e = 0; e < 16384; ++e) s0c[e] = float(S[e]);
        // U = Uv - W S0^T from this S0 (the checkpoint state pass's output, which this path
        // replaces), [t][v].
        const std::vector<double> U = R::ChunkU(ch, S);
        std::copy(U.begin(), U.end(),
                  reinterpret_cast<float*>(wsp + lay.u) + (slot * H + h) * 8192);
        if (const char* ar = from_records ? std::getenv("EMU_S0_ARITH") : nullptr) {
          S = EmulatedStateStep(ch, S, std::atoi(ar));
        } else {
          S = R::StateStep(ch, S);
        }
        if (exact_ds1) kept.push_back(std::move(ch));
      }
      if (exact_ds1) {  // the reverse chain in FP64
        std::vector<double> dS(in.dfinal.begin() + (d * H + h) * 16384,
                               in.dfinal.begin() + (d * H + h + 1) * 16384);
        for (int64_t c = chunks - 1; c >= 0; --c) {
          const int64_t slot = bos / 64 + d + c;
          for (int e = 0; e < 16384; ++e) g_exact_ds1[(slot * H + h) * 16384 + e] = float(dS[e]);
          dS = R::ReverseStep(p, kept[c], dS);
        }
      }
    }
  }
}

// The backward's outputs, poisoned (NaN / 0xFFFF) until the kernels write them.
struct Outputs {
  std::vector<uint16_t> dq, dk, dv, dg, dbeta;
  std::vector<float> dA, ddt, dinit;
  uint32_t status = 0;
};

// Kernels 2-4 (reverse chain with `chain_rows`-row slices, per-chunk pass, parameter reduce) on
// the records and chunk-start states in the workspace.
inline Outputs RunBackwardKernels(const Inputs& in, const K::kda_cuda::KdaShape& s,
                                  const L::ChunkBwdLayout& lay, char* wsp, int chain_rows) {
  using namespace cakegrad::kernels::kda_cuda;
  const int64_t H = s.H, N = s.N, n = s.total_tokens * H * 128;
  const int64_t slots = L::ChunkSlots(s.total_tokens, N);
  Outputs o{std::vector<uint16_t>(n, 0xFFFF),
            std::vector<uint16_t>(n, 0xFFFF),
            std::vector<uint16_t>(n, 0xFFFF),
            std::vector<uint16_t>(n, 0xFFFF),
            std::vector<uint16_t>(s.total_tokens * H, 0xFFFF),
            std::vector<float>(H, NAN),
            std::vector<float>(H * 128, NAN),
            std::vector<float>(N * H * 16384, NAN)};
  ChunkBwdArgs b{};
  b.s = s;
  b.s.device_status = &o.status;
  b.q = in.q.data();
  b.k = in.k.data();
  b.v = in.v.data();
  b.g = in.g.data();
  b.beta = in.beta.data();
  b.d_o = in.d_o.data();
  b.A_log = in.A_log.data();
  b.dt_bias = in.dt_bias.data();
  b.dfinal_state = in.dfinal.data();
  b.records = wsp + lay.records;
  b.s0 = reinterpret_cast<const float*>(wsp + lay.s0);
  b.ds1 = reinterpret_cast<float*>(wsp + lay.ds1);
  b.du = reinterpret_cast<float*>(wsp + lay.du);
  b.partials = reinterpret_cast<float*>(wsp + lay.partials);
  b.chunk_p = reinterpret_cast<const float*>(wsp + lay.p);
  b.chunk_tinv = reinterpret_cast<const float*>(wsp + lay.tinv);
  b.chunk_u = reinterpret_cast<const float*>(wsp + lay.u);
  if (g_emu_slots_counted) b.ready = reinterpret_cast<unsigned*>(wsp + lay.ready);
  b.dq = o.dq.data();
  b.dk = o.dk.data();
  b.dv = o.dv.data();
  b.dg = o.dg.data();
  b.dbeta = o.dbeta.data();
  b.dinitial_state = o.dinit.data();
  // The chain's cluster instance (the launch's choice), or with EMU_CHAIN_PLAIN set its plain
  // fallback (cp.async into the same tiles).
  const bool plain = std::getenv("EMU_CHAIN_PLAIN") != nullptr;
  auto chain = [&](auto rows) {
    constexpr int kRows = decltype(rows)::value;
    using Tr = ChainTraits<kRows>;
    EmuLaunch({unsigned(Tr::kSlices), unsigned(H), unsigned(N)}, Tr::kThreads, [&] {
      if (plain) {
        KdaChunkDstateKernel<kRows, false>(b, McNoMaps{});
      } else {
        KdaChunkDstateKernel<kRows, true>(b, McMaps{});
      }
    });
  };
  if (chain_rows == 16) chain(std::integral_constant<int, 16>{});
  if (chain_rows == 32) chain(std::integral_constant<int, 32>{});
  if (chain_rows == 64) chain(std::integral_constant<int, 64>{});
  if (b.ready != nullptr) {
    b.ready_target = kEmuStateSlices + 128 / chain_rows;
    ExpectSlotCounts(in, N, H, slots, b.ready, b.ready_target, "the reverse chain");
  }
  if (!g_exact_ds1.empty()) {
    std::memcpy(b.ds1, g_exact_ds1.data(), g_exact_ds1.size() * sizeof(float));
  }
  // The launch's grid (ChunkSlotGrid); EMU_GRAD_GRID_Y=n folds the slots at n rows instead of
  // 65535, to exercise the z rows and the CTAs past the last slot.
  b.slots = slots;
  const char* fold = std::getenv("EMU_GRAD_GRID_Y");
  const int64_t max_y = fold != nullptr ? std::max<int64_t>(1, std::atoll(fold)) : 65535;
  EmuLaunch(EmuGrid(ChunkSlotGrid(slots, H, max_y)), GradTraits::kThreads,
            [&] { KdaChunkGradKernel(b); });
  EmuLaunch({unsigned(H), 1, 1}, kReduceThreads,
            [&] { KdaChunkParamReduceKernel(b.partials, slots, H, o.dA.data(), o.ddt.data()); });
  return o;
}

}  // namespace kda_emu
