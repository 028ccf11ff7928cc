// The KDA CUDA kernels against the FP64 reference (fresh random inputs, poisoned outputs), their
// bitwise determinism (runs, garbage workspaces, streams, graph replay), malformed cu_seqlens
// and argument checks. The forward is chunked (64-token chunks, 16-token decay sub-chunks), so
// the forward-only cases add chunk edges, slow decay (long memory) and gates at lower_bound.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "cakegrad/kernels/kda.h"
#include "common/test_util.h"
#include "cuda/kda_chunked_backward.cuh"
#include "gpu/gpu_test_util.h"
#include "reference/kda_layout.h"
#include "reference/kda_reference_internal.h"

namespace cakegrad::kernels {
namespace {

using testing::DeviceBuffer;
using testing::Fnv1a;
using testing::RelL2;

constexpr int64_t kD = kKdaHeadDim;
constexpr int64_t kDD = kD * kD;

struct Shape {
  int64_t B = 1, T = 0, H = 1;
  std::vector<int64_t> lens;  // packed document lengths (B == 1), or empty: no cu_seqlens
  bool int32 = false;
  float scale = kKdaDefaultScale;
  float lower_bound = kKdaDefaultLowerBound;
  bool with_initial = true;
  double dt_mean = 0.0;  // dt_bias ~ N(dt_mean, 0.5): -6 gives gates near 0 (slow decay)
  double g_mean = 0.0;   // g ~ N(g_mean, 1): +6 puts most gates near lower_bound
  int rep = 0;           // > 0: another draw of the same shape (inputs are freshly seeded)
  std::string Name() const {
    std::string s = "B" + std::to_string(B) + "_T" + std::to_string(T) + "_H" + std::to_string(H);
    if (rep > 0) s += "_rep" + std::to_string(rep);
    if (!lens.empty()) s += "_docs" + std::to_string(lens.size()) + (int32 ? "_i32" : "_i64");
    if (!with_initial) s += "_noinit";
    if (dt_mean != 0.0) s += "_slowdecay";
    if (g_mean != 0.0) s += "_fastdecay";
    return s;
  }
};

Shape Packed(std::vector<int64_t> lens, int64_t H, bool int32) {
  Shape s;
  s.lens = std::move(lens);
  s.T = std::accumulate(s.lens.begin(), s.lens.end(), int64_t{0});
  s.H = H;
  s.int32 = int32;
  return s;
}

// Fresh random host inputs of one problem (SPEC distributions).
struct HostData {
  int64_t N = 0, tok = 0;
  std::vector<int64_t> cu;
  std::vector<uint16_t> q, k, v, g, beta, d_o;
  std::vector<float> A_log, dt_bias, s0, dfs;
};

HostData MakeHost(const Shape& s) {
  HostData h;
  h.N = s.lens.empty() ? s.B : static_cast<int64_t>(s.lens.size());
  h.tok = s.B * s.T;
  if (!s.lens.empty()) {
    h.cu.push_back(0);
    for (int64_t l : s.lens) h.cu.push_back(h.cu.back() + l);
  }
  const size_t n = h.tok * s.H * kD;
  h.q = testing::RandomBf16(n);
  h.k = testing::RandomBf16(n);
  h.v = testing::RandomBf16(n);
  h.g = testing::RandomBf16(n, s.g_mean);
  h.beta = testing::RandomBf16(h.tok * s.H);
  h.d_o = testing::RandomBf16(n);
  h.A_log = testing::UniformFloat(s.H, -1.0, 1.0);
  h.dt_bias = testing::RandomFloat(s.H * kD, s.dt_mean, 0.5);
  h.s0 = testing::RandomFloat(h.N * s.H * kDD, 0.0, 0.1);
  h.dfs = testing::RandomFloat(h.N * s.H * kDD);
  return h;
}

int64_t WorkspaceBytes(const Shape& s, int64_t num_docs) {
  return std::max(KdaBackwardWorkspaceBytes(s.B, s.T, s.H, num_docs),
                  KdaForwardWorkspaceBytes(s.B, s.T, s.H, num_docs));
}

// Host inputs and device buffers of one problem; outputs are poisoned before every call.
struct Problem {
  Shape sh;
  HostData h;
  DeviceBuffer<uint16_t> dq_in, dk_in, dv_in, dg_in, dbeta_in, ddo;
  DeviceBuffer<float> dA_log, ddt_bias, ds0, ddfs;
  DeviceBuffer<int64_t> dcu64;
  DeviceBuffer<int32_t> dcu32;
  DeviceBuffer<uint16_t> o, dq, dk, dv, dg, dbeta;
  DeviceBuffer<float> fs, gA, gdt, gs0;
  DeviceBuffer<uint8_t> ws;

  explicit Problem(const Shape& s)
      : sh(s),
        h(MakeHost(s)),
        dq_in(h.q),
        dk_in(h.k),
        dv_in(h.v),
        dg_in(h.g),
        dbeta_in(h.beta),
        ddo(h.d_o),
        dA_log(h.A_log),
        ddt_bias(h.dt_bias),
        ds0(h.s0),
        ddfs(h.dfs),
        dcu64(h.cu),
        dcu32(std::vector<int32_t>(h.cu.begin(), h.cu.end())),
        o(h.tok * s.H * kD),
        dq(h.tok * s.H * kD),
        dk(h.tok * s.H * kD),
        dv(h.tok * s.H * kD),
        dg(h.tok * s.H * kD),
        dbeta(h.tok * s.H),
        fs(h.N * s.H * kDD),
        gA(s.H),
        gdt(s.H * kD),
        gs0(h.N * s.H * kDD),
        ws(static_cast<size_t>(WorkspaceBytes(s, s.lens.empty() ? 0 : h.N))) {}

  int64_t NumDocsParam() const { return sh.lens.empty() ? 0 : h.N; }
  const void* CuPtr() const {
    if (h.cu.empty()) return nullptr;
    return sh.int32 ? static_cast<const void*>(dcu32.get()) : static_cast<const void*>(dcu64.get());
  }

  void Poison() {
    for (auto* b : {&o, &dq, &dk, &dv, &dg, &dbeta}) b->Fill(0xFF);
    for (auto* b : {&fs, &gA, &gdt, &gs0}) b->Fill(0xFF);
  }

  KdaFwdParams Fwd() {
    KdaFwdParams p;
    p.q = dq_in.get();
    p.k = dk_in.get();
    p.v = dv_in.get();
    p.g = dg_in.get();
    p.beta = dbeta_in.get();
    p.A_log = dA_log.get();
    p.dt_bias = ddt_bias.get();
    p.initial_state = sh.with_initial ? ds0.get() : nullptr;
    p.cu_seqlens = CuPtr();
    p.seqlens_dtype = sh.int32 ? DType::kINT32 : DType::kINT64;
    p.o = o.get();
    p.final_state = fs.get();
    p.workspace = ws.get();
    p.workspace_bytes = static_cast<int64_t>(ws.bytes());
    p.B = sh.B;
    p.T = sh.T;
    p.H = sh.H;
    p.num_docs = NumDocsParam();
    p.scale = sh.scale;
    p.lower_bound = sh.lower_bound;
    return p;
  }

  KdaBwdParams Bwd() {
    KdaBwdParams p;
    p.q = dq_in.get();
    p.k = dk_in.get();
    p.v = dv_in.get();
    p.g = dg_in.get();
    p.beta = dbeta_in.get();
    p.A_log = dA_log.get();
    p.dt_bias = ddt_bias.get();
    p.initial_state = sh.with_initial ? ds0.get() : nullptr;
    p.d_o = ddo.get();
    p.dfinal_state = ddfs.get();
    p.cu_seqlens = CuPtr();
    p.seqlens_dtype = sh.int32 ? DType::kINT32 : DType::kINT64;
    p.dq = dq.get();
    p.dk = dk.get();
    p.dv = dv.get();
    p.dg = dg.get();
    p.dbeta = dbeta.get();
    p.dA_log = gA.get();
    p.ddt_bias = gdt.get();
    p.dinitial_state = gs0.get();
    p.workspace = ws.get();
    p.workspace_bytes = static_cast<int64_t>(ws.bytes());
    p.B = sh.B;
    p.T = sh.T;
    p.H = sh.H;
    p.num_docs = NumDocsParam();
    p.scale = sh.scale;
    p.lower_bound = sh.lower_bound;
    return p;
  }

  // Every output, as raw bytes, for bitwise comparisons.
  std::vector<std::vector<uint8_t>> Snapshot() const {
    std::vector<std::vector<uint8_t>> out;
    auto add = [&](const void* ptr, size_t bytes) {
      std::vector<uint8_t> h(bytes);
      if (bytes > 0)
        EXPECT_EQ(cudaMemcpy(h.data(), ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      out.push_back(std::move(h));
    };
    add(o.get(), o.bytes());
    add(fs.get(), fs.bytes());
    add(dq.get(), dq.bytes());
    add(dk.get(), dk.bytes());
    add(dv.get(), dv.bytes());
    add(dg.get(), dg.bytes());
    add(dbeta.get(), dbeta.bytes());
    add(gA.get(), gA.bytes());
    add(gdt.get(), gdt.bytes());
    add(gs0.get(), gs0.bytes());
    return out;
  }

  kda_ref::Problem Exact() const {
    kda_ref::Problem p;
    p.total_tokens = h.tok;
    p.H = sh.H;
    if (h.cu.empty()) {
      for (int64_t b = 0; b <= sh.B; ++b) p.cu.push_back(b * sh.T);
    } else {
      p.cu = h.cu;
    }
    p.q = testing::Bf16ToDouble(h.q);
    p.k = testing::Bf16ToDouble(h.k);
    p.v = testing::Bf16ToDouble(h.v);
    p.g = testing::Bf16ToDouble(h.g);
    p.beta = testing::Bf16ToDouble(h.beta);
    p.A_log = testing::ToDouble(h.A_log);
    p.dt_bias = testing::ToDouble(h.dt_bias);
    if (sh.with_initial) p.s0 = testing::ToDouble(h.s0);
    p.scale = sh.scale;
    p.lower_bound = sh.lower_bound;
    return p;
  }
};

void RunBoth(Problem& pr, cudaStream_t stream) {
  const Status f = KdaForwardCuda(pr.Fwd(), stream);
  ASSERT_TRUE(f.ok()) << f.message();
  const Status b = kda_cuda::KdaBackwardSequentialCuda(pr.Bwd(), stream);
  ASSERT_TRUE(b.ok()) << b.message();
  CUDA_ASSERT_OK(cudaGetLastError());
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream));
}

class KdaKernelsAccuracy : public ::testing::TestWithParam<Shape> {};

// The chunked backward (kda_chunked_backward.cu; KdaBwdParams::algorithm, auto from 4 heads on)
// after the forward.
void RunBothChunked(Problem& pr, cudaStream_t stream) {
  const Status f = KdaForwardCuda(pr.Fwd(), stream);
  ASSERT_TRUE(f.ok()) << f.message();
  const Status b = kda_cuda::KdaBackwardChunkedCuda(pr.Bwd(), stream);
  ASSERT_TRUE(b.ok()) << b.message();
  CUDA_ASSERT_OK(cudaGetLastError());
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream));
}

// Which backward a run took (CheckAgainstFp64's limit for dA_log).
enum class BackwardKernels { kSequential, kChunked };

void CheckAgainstFp64(Problem& pr, const char* tag, BackwardKernels backward);

// Seeds the input generator for one accuracy draw and prints the seed, so that a failing fresh
// draw (the chunked backward's dA_log tail shows on a few percent of them) can be rerun:
// KDA_TEST_SEED=<seed> with the failing test's --gtest_filter draws the same inputs.
// KDA_TEST_SEED_BASE=<b>: the process's n-th draw (n = 0, 1, ...) takes seed b + n, so that two
// builds run with the same b and --gtest_repeat draw the same inputs (a paired A/B of a tail).
uint64_t SeedFreshDraw() {
  static uint64_t draws = 0;
  const char* env = std::getenv("KDA_TEST_SEED");
  const char* base = std::getenv("KDA_TEST_SEED_BASE");
  const uint64_t seed = env    ? std::strtoull(env, nullptr, 10)
                        : base ? std::strtoull(base, nullptr, 10) + draws
                               : std::random_device{}();
  ++draws;
  testing::Rng().seed(seed);
  std::printf("[ seed ] KDA_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

TEST_P(KdaKernelsAccuracy, MatchesFp64Reference) {
  CAKEGRAD_REQUIRE_GPU();
  SCOPED_TRACE("KDA_TEST_SEED=" + std::to_string(SeedFreshDraw()));
  Problem pr(GetParam());
  pr.Poison();
  RunBoth(pr, nullptr);
  CheckAgainstFp64(pr, "kda", BackwardKernels::kSequential);
}

// The draw at (2, 65, 1) whose dA_log the FP32 sequential backward missed by 2x (1.97e-4; its
// terms sum to 7097 times its size, so FP32 terms cannot reach 1e-4). The FP64 backward must be
// far inside SPEC there, not just inside it: 1e-6 leaves two orders of magnitude of margin.
TEST(KdaKernelsAccuracyPinned, SequentialDalogOnTheIllConditionedOneHeadDraw) {
  CAKEGRAD_REQUIRE_GPU();
  testing::Rng().seed(2752617343ULL);
  Shape sh;
  sh.B = 2;
  sh.T = 65;
  sh.H = 1;
  Problem pr(sh);
  pr.Poison();
  RunBoth(pr, nullptr);
  CheckAgainstFp64(pr, "kda pinned", BackwardKernels::kSequential);
  const kda_ref::Problem ex = pr.Exact();
  kda_ref::Grads gr;
  kda_ref::Backward(ex, testing::Bf16ToDouble(pr.h.d_o), testing::ToDouble(pr.h.dfs), &gr);
  const double err = RelL2(testing::ToDouble(pr.gA.Download()), gr.dA_log);
  std::printf("[ kda pinned ] dA_log rel error %.3e (exact %.6e)\n", err, gr.dA_log[0]);
  EXPECT_LE(err, 1e-6);
}

// SPEC's 1e-4 holds for dA_log on the kernels a call takes by default: below
// kKdaChunkedBackwardMinHeads heads auto runs the sequential ones (kda.h). The chunked ones, when
// asked for there, keep FP32 terms of a per-head sum that cancels strongly, and miss 1e-4 on up to
// ~1% of fresh draws on the worst shapes (H200, 2026-12-01: two heads with slow decay 3 of 381,
// one head 2 of 300, the worst 1.83e-4; bench/results/kda_h200.md, thirty-first session). There
// they are held to the tail's documented bound, and a draw past 1e-4 is printed as such.
constexpr double kChunkedFewHeadsDalogLimit = 1e-3;

// Every output of one run (forward, then either backward) against the FP64 reference.
void CheckAgainstFp64(Problem& pr, const char* tag, BackwardKernels backward) {
  const kda_ref::Problem ex = pr.Exact();
  std::vector<double> o, fs;
  kda_ref::Forward(ex, &o, &fs);
  kda_ref::Grads gr;
  kda_ref::Backward(ex, testing::Bf16ToDouble(pr.h.d_o), testing::ToDouble(pr.h.dfs), &gr);

  const bool few_heads_chunked =
      backward == BackwardKernels::kChunked && pr.sh.H < kKdaChunkedBackwardMinHeads;
  const double dalog_tol = few_heads_chunked ? kChunkedFewHeadsDalogLimit : 1e-4;
  struct Check {
    const char* name;
    std::vector<double> got, exact;
    double tol;
  };
  const std::vector<Check> checks = {
      {"o", testing::Bf16ToDouble(pr.o.Download()), o, 5e-3},
      {"final_state", testing::ToDouble(pr.fs.Download()), fs, 1e-4},
      {"dq", testing::Bf16ToDouble(pr.dq.Download()), gr.dq, 5e-3},
      {"dk", testing::Bf16ToDouble(pr.dk.Download()), gr.dk, 5e-3},
      {"dv", testing::Bf16ToDouble(pr.dv.Download()), gr.dv, 5e-3},
      {"dg", testing::Bf16ToDouble(pr.dg.Download()), gr.dg, 5e-3},
      {"dbeta", testing::Bf16ToDouble(pr.dbeta.Download()), gr.dbeta, 5e-3},
      {"dA_log", testing::ToDouble(pr.gA.Download()), gr.dA_log, dalog_tol},
      {"ddt_bias", testing::ToDouble(pr.gdt.Download()), gr.ddt_bias, 1e-4},
      {"dinitial_state", testing::ToDouble(pr.gs0.Download()), gr.ds0, 1e-4},
  };
  // From kKdaChunkedBackwardMinHeads heads on SPEC's limit stays, also where the chunked dA_log has
  // a known rare tail (gates pinned near lower_bound, kda.h): such a failure is the documented
  // one, and says so.
  auto tail_note = [&](const Check& c, double err) -> const char* {
    if (backward != BackwardKernels::kChunked || std::string(c.name) != "dA_log" || err <= 1e-4) {
      return "";
    }
    if (few_heads_chunked) return " over SPEC's 1e-4: the chunked dA_log tail at few heads";
    if (pr.sh.g_mean != 0.0) return " over SPEC's 1e-4: the chunked dA_log tail at fast decay";
    return "";
  };
  for (const Check& c : checks) {
    const double err = RelL2(c.got, c.exact);
    std::printf("[ %s ] %s %-15s rel-L2 %.3e (limit %.0e)%s\n", tag, pr.sh.Name().c_str(), c.name,
                err, c.tol, tail_note(c, err));
    EXPECT_LE(err, c.tol) << c.name;
  }
  // dA_log's error against the magnitude of its terms (kda_ref::Grads::dA_log_terms). Where the
  // error is the terms' FP32 rounding this ratio stays near FP32's epsilon however much the sum
  // cancels, while rel-L2 divides by a sum that may cancel to nearly nothing. Printed for every
  // draw, so that the suites' logs show whether it does and a bound of that form can be set.
  const std::vector<double>& dalog = std::find_if(checks.begin(), checks.end(), [](const Check& c) {
                                       return std::string(c.name) == "dA_log";
                                     })->got;
  double worst = 0.0, cancel = 0.0;
  for (size_t h = 0; h < dalog.size(); ++h) {
    const double terms = gr.dA_log_terms[h];
    if (terms == 0.0) continue;
    worst = std::max(worst, std::abs(dalog[h] - gr.dA_log[h]) / terms);
    cancel = std::max(cancel, terms / std::max(std::abs(gr.dA_log[h]), 1e-300));
  }
  std::printf("[ %s ] %s dA_log/terms %.3e (terms up to %.3g x |dA_log|)\n", tag,
              pr.sh.Name().c_str(), worst, cancel);
}

std::vector<Shape> AccuracyShapes() {
  std::vector<Shape> s;
  auto plain = [](int64_t B, int64_t T, int64_t H) {
    Shape x;
    x.B = B;
    x.T = T;
    x.H = H;
    return x;
  };
  s.push_back(plain(1, 0, 4));
  s.push_back(plain(1, 1, 4));
  s.push_back(plain(2, 63, 4));
  s.push_back(plain(1, 64, 32));
  s.push_back(plain(2, 65, 1));
  s.push_back(plain(1, 4096, 4));
  s.push_back(plain(1, 16384, 1));
  s.push_back(plain(2, 1024, 32));
  Shape other = plain(1, 200, 2);
  other.scale = 0.37f;
  other.lower_bound = -1.25f;
  other.with_initial = false;
  s.push_back(other);
  // 16 documents of mixed lengths: empty, 1-token, around the 32-token chunk and 8-token
  // sub-chunk edges, and long ones.
  const std::vector<int64_t> lens = {0, 1, 7, 8, 9, 31, 32, 33, 0, 64, 65, 1, 300, 2, 1500, 17};
  s.push_back(Packed(lens, 4, /*int32=*/false));
  s.push_back(Packed(lens, 32, /*int32=*/true));
  return s;
}

// The sequential backward's own extras: documents cut into segments (kda_layout::SegmentLength:
// fewer (document, head) chains than twice the backward's resident clusters) packed with empty and
// 1-token ones, an odd length whose last segment is partial, and gates near lower_bound (segment
// maps that underflow to zero).
std::vector<Shape> SequentialShapes() {
  std::vector<Shape> s = AccuracyShapes();
  const std::vector<int64_t> lens = {0, 1, 7, 8, 9, 31, 32, 33, 0, 64, 65, 1, 300, 2, 1500, 17};
  s.push_back(Packed(lens, 1, /*int32=*/true));
  Shape odd;
  odd.T = 5000;
  odd.H = 3;
  s.push_back(odd);
  Shape fast;
  fast.B = 2;
  fast.T = 1000;
  fast.H = 1;
  fast.g_mean = 6.0;
  s.push_back(fast);
  return s;
}

INSTANTIATE_TEST_SUITE_P(Shapes, KdaKernelsAccuracy, ::testing::ValuesIn(SequentialShapes()),
                         [](const ::testing::TestParamInfo<Shape>& i) { return i.param.Name(); });

// The chunked backward (first version, issue #5) on the backward's shapes, plus long documents
// with fresh draws (dA_log is ill-conditioned: its exact value is up to ~6000x below the sum of
// its terms at T = 16384, bench/results/kda_h200.md), slow decay (long memory over 256 chunks),
// gates near lower_bound, and documents around the 64-token chunk edges.
class KdaChunkedBackwardAccuracy : public ::testing::TestWithParam<Shape> {};

TEST_P(KdaChunkedBackwardAccuracy, MatchesFp64Reference) {
  CAKEGRAD_REQUIRE_GPU();
  SCOPED_TRACE("KDA_TEST_SEED=" + std::to_string(SeedFreshDraw()));
  Problem pr(GetParam());
  pr.Poison();
  RunBothChunked(pr, nullptr);
  CheckAgainstFp64(pr, "kda chunked bwd", BackwardKernels::kChunked);
  // KDA_PAIR_SEQUENTIAL=1: the sequential backward on the same draw too, so that a tail of the
  // chunked one's errors can be told from the problem's conditioning (both printed per draw).
  if (const char* pair = std::getenv("KDA_PAIR_SEQUENTIAL"); pair && std::string(pair) == "1") {
    pr.Poison();
    RunBoth(pr, nullptr);
    CheckAgainstFp64(pr, "kda sequential bwd", BackwardKernels::kSequential);
  }
}

std::vector<Shape> ChunkedBackwardShapes() {
  std::vector<Shape> s = AccuracyShapes();
  auto plain = [](int64_t B, int64_t T, int64_t H) {
    Shape x;
    x.B = B;
    x.T = T;
    x.H = H;
    return x;
  };
  for (int rep = 1; rep <= 3; ++rep) {
    Shape x = plain(1, 16384, 2);
    x.rep = rep;
    s.push_back(x);
  }
  Shape slow = plain(1, 16384, 2);
  slow.dt_mean = -6.0;
  s.push_back(slow);
  Shape slow_packed = Packed({5, 0, 191, 1, 4000}, 2, /*int32=*/false);
  slow_packed.dt_mean = -6.0;
  slow_packed.scale = 0.3f;
  slow_packed.lower_bound = -1.0f;
  slow_packed.with_initial = false;
  s.push_back(slow_packed);
  Shape fast = plain(2, 1000, 4);
  fast.g_mean = 6.0;
  s.push_back(fast);
  Shape fast8 = fast;  // the same gates over twice the heads: how fast dA_log's tail thins with H
  fast8.H = 8;
  s.push_back(fast8);
  // The two slow-decay shapes again at 4 heads, the fewest that auto sends to these kernels: the
  // default path's hardest cancellation in dA_log.
  Shape slow4 = slow;
  slow4.H = 4;
  s.push_back(slow4);
  Shape slow_packed4 = slow_packed;
  slow_packed4.H = 4;
  s.push_back(slow_packed4);
  // The tail shape (2, 65, 1) with more heads: dA_log's rel-L2 is then over H values, which
  // rarely all cancel at once (the auto choice's premise, kda.h). (2, 63, 4), the least head
  // count auto sends here on the one-partial-chunk shape, is among AccuracyShapes.
  s.push_back(plain(2, 65, 2));
  s.push_back(plain(2, 65, 4));
  const std::vector<int64_t> lens = {63, 0, 64, 1, 65, 15, 16, 17, 127, 128, 0, 129, 1, 48, 200, 2};
  s.push_back(Packed(lens, 3, /*int32=*/false));
  return s;
}

INSTANTIATE_TEST_SUITE_P(Shapes, KdaChunkedBackwardAccuracy,
                         ::testing::ValuesIn(ChunkedBackwardShapes()),
                         [](const ::testing::TestParamInfo<Shape>& i) { return i.param.Name(); });

// The forward alone (its FP64 reference is cheap enough for long and wide shapes).
class KdaForwardAccuracy : public ::testing::TestWithParam<Shape> {};

TEST_P(KdaForwardAccuracy, MatchesFp64Reference) {
  CAKEGRAD_REQUIRE_GPU();
  SCOPED_TRACE("KDA_TEST_SEED=" + std::to_string(SeedFreshDraw()));
  Problem pr(GetParam());
  pr.Poison();
  const Status f = KdaForwardCuda(pr.Fwd(), nullptr);
  ASSERT_TRUE(f.ok()) << f.message();
  CUDA_ASSERT_OK(cudaGetLastError());
  CUDA_ASSERT_OK(cudaStreamSynchronize(nullptr));
  std::vector<double> o, fs;
  kda_ref::Forward(pr.Exact(), &o, &fs);
  const double eo = RelL2(testing::Bf16ToDouble(pr.o.Download()), o);
  const double efs = RelL2(testing::ToDouble(pr.fs.Download()), fs);
  std::printf(
      "[ kda fwd ] %-40s o rel-L2 %.3e (limit 5e-3)  final_state rel-L2 %.3e (limit 1e-4)\n",
      GetParam().Name().c_str(), eo, efs);
  EXPECT_LE(eo, 5e-3);
  EXPECT_LE(efs, 1e-4);
}

std::vector<Shape> ForwardShapes() {
  std::vector<Shape> s;
  auto plain = [](int64_t B, int64_t T, int64_t H) {
    Shape x;
    x.B = B;
    x.T = T;
    x.H = H;
    return x;
  };
  for (int64_t T : {0, 1, 63, 64, 65, 127, 129, 4096}) s.push_back(plain(2, T, 4));
  s.push_back(plain(2, 200, 32));
  s.push_back(plain(2, 4096, 1));
  s.push_back(plain(1, 16384, 4));
  Shape slow = plain(1, 16384, 2);  // long memory: errors could pile up over 256 chunks
  slow.dt_mean = -6.0;
  s.push_back(slow);
  Shape fast = plain(2, 1000, 4);  // gates near -5: decay factors up to e^75 per sub-chunk
  fast.g_mean = 6.0;
  s.push_back(fast);
  Shape fast_noinit = fast;
  fast_noinit.with_initial = false;
  fast_noinit.scale = 2.5f;
  s.push_back(fast_noinit);
  Shape mild = plain(1, 777, 4);
  mild.lower_bound = -0.3f;
  s.push_back(mild);
  // Documents around the 64-token chunk and 16-token sub-chunk edges, empty and 1-token ones.
  const std::vector<int64_t> lens = {63, 0, 64, 1, 65, 15, 16, 17, 127, 128, 0, 129, 1, 48, 200, 2};
  s.push_back(Packed(lens, 4, /*int32=*/false));
  s.push_back(Packed(lens, 1, /*int32=*/true));
  Shape packed_fast = Packed(lens, 2, false);
  packed_fast.g_mean = 6.0;
  packed_fast.with_initial = false;
  s.push_back(packed_fast);
  return s;
}

INSTANTIATE_TEST_SUITE_P(Shapes, KdaForwardAccuracy, ::testing::ValuesIn(ForwardShapes()),
                         [](const ::testing::TestParamInfo<Shape>& i) { return i.param.Name(); });

// The chunk records the forward's preparation kernel leaves in the workspace (layout:
// reference/kda_layout.h) against the same quantities in FP64: a failure of the forward is then
// placed in the preparation or in the state pass.
TEST(KdaKernels, ForwardChunkRecordsMatchFp64) {
  CAKEGRAD_REQUIRE_GPU();
  namespace L = kda_layout;
  Shape sh = Packed({70, 0, 1, 64, 130}, 2, /*int32=*/false);
  sh.g_mean = 2.0;
  Problem pr(sh);
  pr.ws.Fill(0);
  pr.Poison();
  ASSERT_TRUE(KdaForwardCuda(pr.Fwd(), nullptr).ok());
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  const std::vector<uint8_t> ws = pr.ws.Download();
  const HostData& hd = pr.h;
  const int64_t H = sh.H;
  const std::vector<double> q = testing::Bf16ToDouble(hd.q), k = testing::Bf16ToDouble(hd.k),
                            v = testing::Bf16ToDouble(hd.v), g = testing::Bf16ToDouble(hd.g),
                            beta = testing::Bf16ToDouble(hd.beta);
  auto bf = [](uint16_t x) {
    const uint32_t bits = uint32_t{x} << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return static_cast<double>(f);
  };
  auto split = [&](const uint8_t* rec, int64_t off, int64_t count, int64_t i) {
    uint16_t hi, lo;
    std::memcpy(&hi, rec + off + 2 * i, 2);
    std::memcpy(&lo, rec + off + 2 * (count + i), 2);
    return bf(hi) + bf(lo);
  };
  struct Acc {
    const char* name;
    std::vector<double> got, exact;
  };
  std::vector<Acc> acc = {{"-W", {}, {}}, {"Uv", {}, {}},     {"Q Gam", {}, {}},
                          {"M", {}, {}},  {"Kdec^T", {}, {}}, {"Gam_C", {}, {}}};
  constexpr int64_t C = L::kChunk;
  for (size_t n = 0; n + 1 < hd.cu.size(); ++n) {
    const int64_t bos = hd.cu[n], len = hd.cu[n + 1] - bos;
    for (int64_t c = 0; c * C < len; ++c) {
      const int64_t t0 = bos + c * C, nt = std::min(C, len - c * C);
      for (int64_t h = 0; h < H; ++h) {
        const uint8_t* rec =
            ws.data() + ((bos / C + static_cast<int64_t>(n) + c) * H + h) * L::kRecBytes;
        std::vector<double> qh(C * kD, 0.0), kh(C * kD, 0.0), G(C * kD, 0.0), bt(C, 0.0);
        for (int64_t t = 0; t < C; ++t) {
          for (int64_t j = 0; j < kD; ++j) G[t * kD + j] = t > 0 ? G[(t - 1) * kD + j] : 0.0;
          if (t >= nt) continue;
          const int64_t base = ((t0 + t) * H + h) * kD;
          double sq = 0, sk = 0;
          for (int64_t j = 0; j < kD; ++j) {
            sq += q[base + j] * q[base + j];
            sk += k[base + j] * k[base + j];
          }
          const double ea = std::exp(static_cast<double>(hd.A_log[h]));
          for (int64_t j = 0; j < kD; ++j) {
            qh[t * kD + j] = q[base + j] / std::sqrt(sq + 1e-6);
            kh[t * kD + j] = k[base + j] / std::sqrt(sk + 1e-6);
            const double x = ea * (g[base + j] + hd.dt_bias[h * kD + j]);
            G[t * kD + j] += sh.lower_bound / (1.0 + std::exp(-x));
          }
          bt[t] = 1.0 / (1.0 + std::exp(-beta[(t0 + t) * H + h]));
        }
        std::vector<double> A(C * C, 0.0), M(C * C, 0.0);
        for (int64_t t = 0; t < C; ++t) {
          for (int64_t i = 0; i <= t; ++i) {
            double a = 0, m = 0;
            for (int64_t j = 0; j < kD; ++j) {
              const double e = std::exp(G[t * kD + j] - G[i * kD + j]) * kh[i * kD + j];
              a += kh[t * kD + j] * e;
              m += qh[t * kD + j] * e;
            }
            if (i < t) A[t * C + i] = bt[t] * a;
            M[t * C + i] = m;
          }
        }
        // X = (I + A)^-1 [beta K Gam | beta V]
        std::vector<double> X(C * 2 * kD, 0.0);
        for (int64_t t = 0; t < C; ++t) {
          for (int64_t col = 0; col < 2 * kD; ++col) {
            double rhs = 0;
            if (t < nt) {
              rhs = col < kD ? bt[t] * kh[t * kD + col] * std::exp(G[t * kD + col])
                             : bt[t] * v[((t0 + t) * H + h) * kD + col - kD];
            }
            for (int64_t j = 0; j < t; ++j) rhs -= A[t * C + j] * X[j * 2 * kD + col];
            X[t * 2 * kD + col] = rhs;
          }
        }
        for (int64_t t = 0; t < C; ++t) {
          for (int64_t j = 0; j < kD; ++j) {
            acc[0].got.push_back(split(rec, L::kRecNegW, C * kD, t * kD + j));
            acc[0].exact.push_back(-X[t * 2 * kD + j]);
            float u;
            std::memcpy(&u, rec + L::kRecUv + 4 * (t * kD + j), 4);
            acc[1].got.push_back(u);
            acc[1].exact.push_back(X[t * 2 * kD + kD + j]);
            acc[2].got.push_back(split(rec, L::kRecQg, C * kD, t * kD + j));
            acc[2].exact.push_back(qh[t * kD + j] * std::exp(G[t * kD + j]));
            acc[4].got.push_back(split(rec, L::kRecKdecT, C * kD, j * C + t));
            acc[4].exact.push_back(kh[t * kD + j] * std::exp(G[(C - 1) * kD + j] - G[t * kD + j]));
          }
          for (int64_t i = 0; i < C; ++i) {
            acc[3].got.push_back(split(rec, L::kRecM, C * C, t * C + i));
            acc[3].exact.push_back(M[t * C + i]);
          }
        }
        for (int64_t j = 0; j < kD; ++j) {
          float gc;
          std::memcpy(&gc, rec + L::kRecGamC + 4 * j, 4);
          acc[5].got.push_back(gc);
          acc[5].exact.push_back(std::exp(G[(C - 1) * kD + j]));
        }
      }
    }
  }
  for (const Acc& a : acc) {
    const double err = RelL2(a.got, a.exact);
    std::printf("[ kda records ] %-7s rel-L2 %.3e over %zu values\n", a.name, err, a.got.size());
    EXPECT_LE(err, 1e-4) << a.name;
  }
}

// KDA_HASH_SEED_OFFSET=n: the hash tests draw other pinned inputs (seed + n), so that two builds
// can be compared bitwise on as many draws as wanted, one process per offset.
uint64_t HashSeedOffset() {
  const char* env = std::getenv("KDA_HASH_SEED_OFFSET");
  return env ? std::strtoull(env, nullptr, 10) : 0;
}

// A hash test's problem: inputs drawn from seed + HashSeedOffset(), the workspace zero-filled.
// The generator is reseeded afterwards, so that later tests draw fresh inputs again.
std::unique_ptr<Problem> PinnedProblem(const Shape& shape, uint64_t seed) {
  testing::Rng().seed(seed + HashSeedOffset());
  auto pr = std::make_unique<Problem>(shape);
  testing::Rng().seed(std::random_device{}());
  pr->ws.Fill(0);
  return pr;
}

// Prints FNV-1a hashes of the chunk records (the whole workspace, zero-filled first) and of o,
// final_state for pinned inputs, so that builds or instances of the preparation kernel can be
// compared bitwise across processes (tools/gpu/run_kda_candidate.sh names the last build's).
// Checks nothing itself beyond a successful forward.
TEST(KdaKernels, ForwardRecordHashesForCrossBuildComparison) {
  CAKEGRAD_REQUIRE_GPU();
  // The first shape takes the 32-row state pass (its hashes are the ones every session since the
  // fifth compares); the other two take the 16-row one (4 (document, head) chains) and the 64-row
  // one (80 chains), so that a change to the state pass is checked bitwise at every slice width.
  struct Pinned {
    const char* tag;  // printed after "kda hashes"
    Shape shape;
    uint64_t seed;
  };
  Shape first = Packed({70, 0, 1, 64, 130, 700, 2048}, 4, /*int32=*/false);
  first.g_mean = 2.0;
  const std::vector<Pinned> pinned = {
      {"", first, 20261129},
      {" 16-row", Packed({300, 1000}, 2, /*int32=*/true), 20261130},
      {" 64-row",
       Packed({70, 0, 1, 64, 130, 65, 129, 200, 64, 63, 300, 1, 17, 128, 256, 90, 33, 500, 2, 64},
              4, /*int32=*/false),
       20261130}};
  for (const Pinned& pin : pinned) {
    const std::unique_ptr<Problem> pinned_problem = PinnedProblem(pin.shape, pin.seed);
    Problem& pr = *pinned_problem;
    ASSERT_TRUE(KdaForwardCuda(pr.Fwd(), nullptr).ok());
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    const std::vector<uint8_t> ws = pr.ws.Download();
    const std::vector<uint16_t> o = pr.o.Download();
    const std::vector<float> fs = pr.fs.Download();
    std::printf("[ kda hashes%s ] records %016llx o %016llx final_state %016llx\n", pin.tag,
                Fnv1a(ws.data(), ws.size()), Fnv1a(o.data(), 2 * o.size()),
                Fnv1a(fs.data(), 4 * fs.size()));
  }
}

// The forward and the sequential backward of packed documents `lens` x H: bitwise equal across
// runs, garbage workspaces, streams and graph replay.
void ExpectBitwiseDeterministic(const std::vector<int64_t>& lens, int64_t H) {
  Problem pr(Packed(lens, H, false));
  pr.ws.Fill(0x00);
  pr.Poison();
  RunBoth(pr, nullptr);
  const auto first = pr.Snapshot();

  pr.ws.Fill(0xA5);
  pr.Poison();
  RunBoth(pr, nullptr);
  EXPECT_TRUE(pr.Snapshot() == first) << "second run, garbage workspace";

  cudaStream_t stream;
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  pr.ws.Fill(0x3C);
  pr.Poison();
  // cudaMemset runs on the legacy stream, asynchronously to the host, and a non-blocking stream
  // does not wait for it: without this the fills can land during or after the run below.
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  RunBoth(pr, stream);
  EXPECT_TRUE(pr.Snapshot() == first) << "another stream";

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_ASSERT_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Status f = KdaForwardCuda(pr.Fwd(), stream);
  const Status b = kda_cuda::KdaBackwardSequentialCuda(pr.Bwd(), stream);
  CUDA_ASSERT_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_TRUE(b.ok()) << b.message();
  CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 2; ++rep) {
    pr.ws.Fill(static_cast<uint8_t>(0x11 * (rep + 3)));
    pr.Poison();
    CUDA_ASSERT_OK(cudaDeviceSynchronize());  // the fills before the replay (see above)
    CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream));
    CUDA_ASSERT_OK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(pr.Snapshot() == first) << "graph replay " << rep;
  }
  CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));
  CUDA_ASSERT_OK(cudaStreamDestroy(stream));
}

TEST(KdaKernels, BitwiseDeterministicAcrossRunsWorkspacesStreamsAndGraphs) {
  CAKEGRAD_REQUIRE_GPU();
  ExpectBitwiseDeterministic({0, 1, 40, 300, 9, 1000, 33}, 4);  // 28 chains: the 32-row pass
}

// Every output was written (the poison is NaN) and is finite: no BF16 or FP32 element of the
// snapshot has an all-ones exponent.
void ExpectEveryOutputWrittenAndFinite(const Problem& pr) {
  const auto snaps = pr.Snapshot();
  for (size_t i = 0; i < snaps.size(); ++i) {
    const bool fp32 = i == 1 || i >= 7;
    const size_t width = fp32 ? 4 : 2;
    for (size_t b = 0; b < snaps[i].size(); b += width) {
      const uint32_t hi = fp32 ? (uint32_t(snaps[i][b + 3]) << 8 | snaps[i][b + 2])
                               : (uint32_t(snaps[i][b + 1]) << 8 | snaps[i][b]);
      ASSERT_NE(hi & 0x7f80u, 0x7f80u) << "output " << i << " element " << b / width;
    }
  }
}

// Small enough for compute-sanitizer (tools/gpu/run_gpu_tests.sh runs *Sanitize* under memcheck
// and racecheck): packed documents with empty and 1-token ones, then malformed offsets.
TEST(KdaKernels, SanitizePackedAndMalformedCuSeqlens) {
  CAKEGRAD_REQUIRE_GPU();
  Problem pr(Packed({0, 1, 9, 0, 40, 3}, 2, true));
  pr.Poison();
  RunBoth(pr, nullptr);
  ExpectEveryOutputWrittenAndFinite(pr);
  if (HasFatalFailure()) return;
  DeviceBuffer<uint32_t> status(std::vector<uint32_t>{0});
  // Well-formed offsets leave the status word alone.
  KdaFwdParams fp = pr.Fwd();
  fp.device_status = status.get();
  ASSERT_TRUE(KdaForwardCuda(fp, nullptr).ok());
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  EXPECT_EQ(status.Download()[0], 0u);

  const std::vector<std::vector<int32_t>> bad = {
      {0, 1, 9, 5, 40, 50, 53},    // decreasing
      {3, 1, 9, 9, 49, 52, 53},    // cu[0] != 0
      {0, 1, 9, 9, 49, 52, 1000},  // past the end
      {0, -7, 9, 9, 49, 52, 53},   // negative
  };
  for (const auto& cu : bad) {
    DeviceBuffer<int32_t> dcu(cu);
    status.Upload({0});
    KdaFwdParams f = pr.Fwd();
    f.cu_seqlens = dcu.get();
    f.device_status = status.get();
    KdaBwdParams b = pr.Bwd();
    b.cu_seqlens = dcu.get();
    b.device_status = status.get();
    ASSERT_TRUE(KdaForwardCuda(f, nullptr).ok());
    ASSERT_TRUE(kda_cuda::KdaBackwardSequentialCuda(b, nullptr).ok());
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    EXPECT_EQ(status.Download()[0] & kDeviceStatusBadCuSeqlens, kDeviceStatusBadCuSeqlens)
        << cu[0] << "," << cu[1] << "," << cu[3] << "," << cu[6];
  }
}

// SMs of the current device (the state pass's slice width depends on them); 0 if unknown.
int SmCount() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    return 0;
  }
  return sms;
}

// Fails unless `lens` x H takes the `rows`-row state pass on this device. The rule is
// LaunchChunkedForward's: 16 rows (8 slices a chain) while they fit one wave of SMs, 32 rows
// (4 slices) while they fit two, else 64; a problem meant for one pass must not drift to another.
void RequireStatePassRows(const std::vector<int64_t>& lens, int64_t H, int rows) {
  const int sms = SmCount();
  ASSERT_GT(sms, 0) << "the device's SM count";
  const int64_t chains = static_cast<int64_t>(lens.size()) * H;
  const int taken = chains * 8 <= sms ? 16 : chains * 4 <= 2 * sms ? 32 : 64;
  ASSERT_EQ(taken, rows) << chains << " chains on " << sms << " SMs";
}

// Fails unless the chunked backward runs `lens` x H's checkpoint state pass and reverse chain side
// by side in `rows`-row slices (0: one after the other, in the forward's width). Its rule: each
// gets half the SMs, in the narrowest slices that fit one wave there.
void RequireBackwardSideBySideRows(const std::vector<int64_t>& lens, int64_t H, int rows) {
  const int sms = SmCount();
  ASSERT_GT(sms, 0) << "the device's SM count";
  const int64_t chains = static_cast<int64_t>(lens.size()) * H;
  const int taken = chains * 8 <= sms / 2   ? 16
                    : chains * 4 <= sms / 2 ? 32
                    : chains * 2 <= sms / 2 ? 64
                                            : 0;
  ASSERT_EQ(taken, rows) << chains << " chains on " << sms << " SMs (test's rule)";
  ASSERT_EQ(kda_cuda::ChunkedBackwardSideBySideRows(chains, sms), rows)
      << chains << " chains on " << sms << " SMs (the library's rule)";
}

// A state pass width under compute-sanitizer, with its forward and its checkpoint instance (the
// chunked backward's recompute): every output written and finite, and within SPEC of the FP64
// reference.
void SanitizeStatePass(const std::vector<int64_t>& lens, int64_t H, const char* tag) {
  Problem pr(Packed(lens, H, /*int32=*/false));
  pr.Poison();
  RunBothChunked(pr, nullptr);
  ExpectEveryOutputWrittenAndFinite(pr);
  if (::testing::Test::HasFatalFailure()) return;
  CheckAgainstFp64(pr, tag, BackwardKernels::kChunked);
}

// The 64-row state pass: the other *Sanitize* problems have few (document, head) chains and take
// the 16-row pass. 17 short documents x 4 heads = 68 chains, past the 32-row pass's two waves on
// the H200 (4 slices x 68 > 2 x 132 SMs), so the same dispatch takes 64 rows.
TEST(KdaKernels, SanitizeSixtyFourRowStatePass) {
  CAKEGRAD_REQUIRE_GPU();
  const std::vector<int64_t> lens = {1, 0, 9, 64, 65, 3, 2, 1, 0, 17, 1, 5, 1, 1, 70, 2, 130};
  const int64_t H = 4;
  ASSERT_NO_FATAL_FAILURE(RequireStatePassRows(lens, H, 64));
  ASSERT_NO_FATAL_FAILURE(RequireBackwardSideBySideRows(lens, H, 0));
  SanitizeStatePass(lens, H, "kda 64-row chunked bwd");
}

// The 32-row state pass the same way (the 16- and 64-row problems above miss it). 7 documents x
// 4 heads = 28 chains: past one wave of 16-row slices (8 x 28 > 132 SMs), within two of 32-row
// ones (4 x 28 <= 2 x 132). Its forward is the 2-CTA cluster instance; the chunked backward runs
// its checkpoint pass and reverse chain side by side in 64-row slices (2 x 28 <= 132 / 2).
TEST(KdaKernels, SanitizeThirtyTwoRowStatePass) {
  CAKEGRAD_REQUIRE_GPU();
  const std::vector<int64_t> lens = {1, 0, 9, 64, 65, 3, 130};
  const int64_t H = 4;
  ASSERT_NO_FATAL_FAILURE(RequireStatePassRows(lens, H, 32));
  ASSERT_NO_FATAL_FAILURE(RequireBackwardSideBySideRows(lens, H, 64));
  SanitizeStatePass(lens, H, "kda 32-row chunked bwd");
}

// The chunked backward's checkpoint pass and reverse chain side by side in 32-row slices (the
// problems above take 16 or 64): 4 documents x 4 heads = 16 chains, 4 x 16 slices within half the
// H200's SMs, 8 x 16 not. Its forward takes the 16-row pass.
TEST(KdaKernels, SanitizeSideBySideThirtyTwoRowBackward) {
  CAKEGRAD_REQUIRE_GPU();
  const std::vector<int64_t> lens = {1, 0, 70, 130};
  const int64_t H = 4;
  ASSERT_NO_FATAL_FAILURE(RequireStatePassRows(lens, H, 16));
  ASSERT_NO_FATAL_FAILURE(RequireBackwardSideBySideRows(lens, H, 32));
  SanitizeStatePass(lens, H, "kda 32-row side-by-side chunked bwd");
}

// The determinism test through the 16-row pass, whose forward runs as 2-CTA clusters with its
// TMA maps as kernel parameters (graph capture included): 7 documents x 2 heads = 14 chains,
// 8 x 14 slices in one wave of the H200's SMs.
TEST(KdaKernels, BitwiseDeterministicSixteenRowStatePass) {
  CAKEGRAD_REQUIRE_GPU();
  const std::vector<int64_t> lens = {0, 1, 40, 300, 9, 1000, 33};
  const int64_t H = 2;
  ASSERT_NO_FATAL_FAILURE(RequireStatePassRows(lens, H, 16));
  ExpectBitwiseDeterministic(lens, H);
}

// The same through the 64-row pass, whose forward runs as 2-CTA clusters too (one chain a
// cluster; its M buffer and barriers differ from the 16-row one's): 17 documents x 4 heads = 68
// chains, past the 32-row pass's two waves (4 x 68 > 2 x 132 SMs), chains of 0 to 32 chunks so
// that every buffer and barrier phase turns over many times.
TEST(KdaKernels, BitwiseDeterministicSixtyFourRowStatePass) {
  CAKEGRAD_REQUIRE_GPU();
  const std::vector<int64_t> lens = {0,   1,   40, 300, 9,   1000, 33, 64,  65,
                                     129, 700, 2,  17,  256, 500,  3,  2048};
  const int64_t H = 4;
  ASSERT_NO_FATAL_FAILURE(RequireStatePassRows(lens, H, 64));
  ExpectBitwiseDeterministic(lens, H);
}

// The same through the 32-row pass ((1, 8192, 32)'s), whose forward runs as 2-CTA clusters with
// single-buffered -W and Q Gam: 12 documents x 4 heads = 48 chains, past one
// wave of 16-row slices and within two of 32-row ones (8 x 48 > 132, 4 x 48 <= 2 x 132 SMs),
// chains of 0 to 32 chunks (odd and even counts) so that every buffer and barrier phase turns
// over many times.
TEST(KdaKernels, BitwiseDeterministicThirtyTwoRowStatePass) {
  CAKEGRAD_REQUIRE_GPU();
  const std::vector<int64_t> lens = {0, 1, 40, 300, 9, 1000, 33, 64, 65, 129, 2048, 2};
  const int64_t H = 4;
  ASSERT_NO_FATAL_FAILURE(RequireStatePassRows(lens, H, 32));
  ExpectBitwiseDeterministic(lens, H);
}

// The chunked backward: bitwise equal across runs, garbage workspaces, streams and graph replay.
// 28 chains: the checkpoint pass and the reverse chain run side by side, chained with the grad
// kernel by programmatic dependent launch (per-slot counters), in the capture too; and a capture
// on a fresh host thread (a side stream of an older version could not be made there).
TEST(KdaKernels, ChunkedBackwardBitwiseDeterministicAcrossRunsWorkspacesStreamsAndGraphs) {
  CAKEGRAD_REQUIRE_GPU();
  const std::vector<int64_t> lens = {0, 1, 40, 300, 9, 1000, 33};
  ASSERT_NO_FATAL_FAILURE(RequireBackwardSideBySideRows(lens, 4, 64));
  Problem pr(Packed(lens, 4, false));
  pr.ws.Fill(0x00);
  pr.Poison();
  RunBothChunked(pr, nullptr);
  const auto first = pr.Snapshot();

  pr.ws.Fill(0xA5);
  pr.Poison();
  RunBothChunked(pr, nullptr);
  EXPECT_TRUE(pr.Snapshot() == first) << "second run, garbage workspace";

  cudaStream_t stream;
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  pr.ws.Fill(0x3C);
  pr.Poison();
  // cudaMemset runs on the legacy stream, asynchronously to the host, and a non-blocking stream
  // does not wait for it: without this the fills can land during or after the run below.
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  RunBothChunked(pr, stream);
  EXPECT_TRUE(pr.Snapshot() == first) << "another stream";

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_ASSERT_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Status f = KdaForwardCuda(pr.Fwd(), stream);
  const Status b = kda_cuda::KdaBackwardChunkedCuda(pr.Bwd(), stream);
  CUDA_ASSERT_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_TRUE(b.ok()) << b.message();
  CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 2; ++rep) {
    pr.ws.Fill(static_cast<uint8_t>(0x11 * (rep + 3)));
    pr.Poison();
    CUDA_ASSERT_OK(cudaDeviceSynchronize());  // the fills before the replay (see above)
    CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream));
    CUDA_ASSERT_OK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(pr.Snapshot() == first) << "graph replay " << rep;
  }
  CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));

  // The capture on a fresh host thread (gtest's assertions stay on this one).
  int dev = 0;
  CUDA_ASSERT_OK(cudaGetDevice(&dev));
  cudaError_t captured = cudaSuccess;
  std::vector<Status> fresh;  // the forward's and the backward's
  std::thread([&] {
    captured = cudaSetDevice(dev);
    if (captured == cudaSuccess) {
      captured = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
    }
    if (captured != cudaSuccess) return;
    fresh.push_back(KdaForwardCuda(pr.Fwd(), stream));
    fresh.push_back(kda_cuda::KdaBackwardChunkedCuda(pr.Bwd(), stream));
    captured = cudaStreamEndCapture(stream, &graph);
  }).join();
  CUDA_ASSERT_OK(captured);
  ASSERT_EQ(fresh.size(), 2u);
  for (const Status& st : fresh) ASSERT_TRUE(st.ok()) << st.message();
  CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
  pr.ws.Fill(0x5A);
  pr.Poison();
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  CUDA_ASSERT_OK(cudaGraphLaunch(exec, stream));
  CUDA_ASSERT_OK(cudaStreamSynchronize(stream));
  EXPECT_TRUE(pr.Snapshot() == first) << "graph captured on a fresh thread";
  CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
  CUDA_ASSERT_OK(cudaGraphDestroy(graph));
  CUDA_ASSERT_OK(cudaStreamDestroy(stream));
}

// Holds one SM per CTA (its shared memory leaves no room for a KDA pass's CTA) for `ns`
// nanoseconds of the global timer.
__global__ void HoldSmsKernel(unsigned long long ns) {
  extern __shared__ unsigned char held[];
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  if (threadIdx.x == 0) held[0] = 0;
}

// The chunked backward chains its reverse chain, state pass and grad kernel by programmatic
// dependent launch, and the grad kernel's CTAs wait for per-slot counters the passes fill: they
// may, because every CTA of both passes has begun before any grad CTA does, whatever else holds
// SMs. Here a kernel on another stream holds all SMs but `free` for a few milliseconds from just
// before the call, so that the passes' CTAs are placed a few at a time and the grad CTAs meet
// unfilled counters (their waiting path): the call must end, with the bits of an undisturbed
// run. Side by side (64-row slices) and one after the other.
TEST(KdaKernels, ChunkedBackwardKeepsItsBitsWhileAnotherKernelHoldsMostSms) {
  CAKEGRAD_REQUIRE_GPU();
  const int sms = SmCount();
  ASSERT_GT(sms, 16) << "the device's SM count";
  constexpr int kHoldSmem = 200 * 1024;
  CUDA_ASSERT_OK(
      cudaFuncSetAttribute(HoldSmsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kHoldSmem));
  const std::vector<int64_t> side_by_side = {0, 1, 40, 300, 9, 1000, 33};
  const std::vector<int64_t> serial = {1, 0, 9, 64, 65, 3, 2, 1, 0, 17, 1, 5, 1, 1, 70, 2, 130};
  ASSERT_NO_FATAL_FAILURE(RequireBackwardSideBySideRows(side_by_side, 4, 64));
  ASSERT_NO_FATAL_FAILURE(RequireBackwardSideBySideRows(serial, 4, 0));
  cudaStream_t stream, hold;
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&hold, cudaStreamNonBlocking));
  for (const auto* lens : {&side_by_side, &serial}) {
    Problem pr(Packed(*lens, 4, false));
    pr.Poison();
    RunBothChunked(pr, stream);
    const auto undisturbed = pr.Snapshot();
    for (const int free : {2, 8, sms / 2}) {
      SCOPED_TRACE(::testing::Message() << lens->size() << " documents, " << free << " SMs free");
      pr.ws.Fill(0x5A);
      pr.Poison();
      CUDA_ASSERT_OK(cudaDeviceSynchronize());  // the fills before the run (see above)
      HoldSmsKernel<<<static_cast<unsigned>(sms - free), 32, kHoldSmem, hold>>>(3000000ull);
      CUDA_ASSERT_OK(cudaGetLastError());
      RunBothChunked(pr, stream);
      CUDA_ASSERT_OK(cudaStreamSynchronize(hold));
      EXPECT_TRUE(pr.Snapshot() == undisturbed) << "bits differ from the undisturbed run";
    }
  }
  CUDA_ASSERT_OK(cudaStreamDestroy(hold));
  CUDA_ASSERT_OK(cudaStreamDestroy(stream));
}

// Ends a hash line: " name hash" for every output of the problem, then a newline.
void PrintOutputHashes(const Problem& pr) {
  const auto snap = pr.Snapshot();  // o, final_state, dq, dk, dv, dg, dbeta, dA_log, ddt, dinit
  static const char* const kNames[] = {"o",  "final_state", "dq",     "dk",       "dv",
                                       "dg", "dbeta",       "dA_log", "ddt_bias", "dinit"};
  for (size_t i = 0; i < snap.size(); ++i) {
    std::printf(" %s %016llx", kNames[i], Fnv1a(snap[i].data(), snap[i].size()));
  }
  std::printf("\n");
}

// Prints fnv1a hashes of the chunked backward's workspace (records, chunk-start states S0, the
// reverse chain's dS1 per chunk slot, partials) and of every gradient, for pinned inputs, so that
// builds can be compared bitwise across processes (the reverse chain's dS1 and dinitial_state
// included). The tags name the forward's state pass width (32, 16, 64 rows); the backward runs
// its checkpoint pass and reverse chain side by side in 64- and 16-row slices for the first two,
// one after the other in 64-row slices for the third. Checks nothing itself beyond a successful
// backward.
TEST(KdaKernels, ChunkedBackwardHashesForCrossBuildComparison) {
  CAKEGRAD_REQUIRE_GPU();
  struct Pinned {
    const char* tag;  // printed after "kda bwd hashes"
    Shape shape;
    int rows;      // the forward's state pass width this problem must take
    int bwd_rows;  // the backward's side-by-side width (0: one after the other, in `rows`)
    uint64_t seed;
  };
  Shape first = Packed({70, 0, 1, 64, 130, 700, 2048}, 4, /*int32=*/false);
  first.g_mean = 2.0;
  const std::vector<Pinned> pinned = {
      {" 32-row", first, 32, 64, 20261129},
      {" 16-row", Packed({300, 1000}, 2, /*int32=*/true), 16, 16, 20261130},
      {" 64-row",
       Packed({70, 0, 1, 64, 130, 65, 129, 200, 64, 63, 300, 1, 17, 128, 256, 90, 33, 500, 2, 64},
              4, /*int32=*/false),
       64, 0, 20261130}};
  for (const Pinned& pin : pinned) {
    ASSERT_NO_FATAL_FAILURE(RequireStatePassRows(pin.shape.lens, pin.shape.H, pin.rows));
    ASSERT_NO_FATAL_FAILURE(
        RequireBackwardSideBySideRows(pin.shape.lens, pin.shape.H, pin.bwd_rows));
    const std::unique_ptr<Problem> pinned_problem = PinnedProblem(pin.shape, pin.seed);
    Problem& pr = *pinned_problem;
    pr.Poison();
    RunBothChunked(pr, nullptr);
    if (HasFatalFailure()) return;
    const std::vector<uint8_t> ws = pr.ws.Download();
    std::printf("[ kda bwd hashes%s ] workspace %016llx", pin.tag, Fnv1a(ws.data(), ws.size()));
    PrintOutputHashes(pr);
  }
}

// The sequential backward's gradients on pinned inputs, hashed, for comparing builds (a change
// meant to keep its bits, e.g. the twenty-seventh session's token pass: run this test on both
// builds and compare the lines). The workspace is not hashed: its layout may differ between
// builds. Several segments per document (one long document at one head, two at two heads) and
// packed documents with empty and 1-token ones. Checks nothing itself beyond a successful run.
TEST(KdaKernels, SequentialBackwardHashesForCrossBuildComparison) {
  CAKEGRAD_REQUIRE_GPU();
  struct Pinned {
    const char* tag;  // printed after "kda seq bwd hashes"
    Shape shape;
    uint64_t seed;
  };
  Shape one;
  one.T = 3000;
  Shape two;
  two.B = 2;
  two.T = 1100;
  two.H = 2;
  two.g_mean = 2.0;
  const std::vector<Pinned> pinned = {
      {" 1x3000 H1", one, 20261201},
      {" 2x1100 H2", two, 20261202},
      {" packed H3", Packed({0, 1, 700, 65, 0, 1300, 33}, 3, /*int32=*/true), 20261203}};
  for (const Pinned& pin : pinned) {
    const std::unique_ptr<Problem> pinned_problem = PinnedProblem(pin.shape, pin.seed);
    Problem& pr = *pinned_problem;
    pr.Poison();
    RunBoth(pr, nullptr);
    if (HasFatalFailure()) return;
    std::printf("[ kda seq bwd hashes%s ]", pin.tag);
    PrintOutputHashes(pr);
  }
}

// The chunked backward under compute-sanitizer (the *Sanitize* filter): packed documents with
// empty and 1-token ones and a chunk edge, every output written and finite, then malformed
// offsets (clamped, flagged, no out-of-bounds access).
TEST(KdaKernels, SanitizeChunkedBackwardPackedAndMalformedCuSeqlens) {
  CAKEGRAD_REQUIRE_GPU();
  Problem pr(Packed({0, 1, 9, 0, 70, 3}, 2, true));
  pr.Poison();
  RunBothChunked(pr, nullptr);
  ExpectEveryOutputWrittenAndFinite(pr);
  if (HasFatalFailure()) return;
  DeviceBuffer<uint32_t> status(std::vector<uint32_t>{0});
  const std::vector<std::vector<int32_t>> bad = {
      {0, 1, 10, 5, 80, 80, 83},     // decreasing
      {3, 1, 10, 10, 80, 80, 83},    // cu[0] != 0
      {0, 1, 10, 10, 80, 80, 1000},  // past the end
      {0, -7, 10, 10, 80, 80, 83},   // negative
  };
  for (const auto& cu : bad) {
    DeviceBuffer<int32_t> dcu(cu);
    status.Upload({0});
    KdaFwdParams f = pr.Fwd();
    f.cu_seqlens = dcu.get();
    f.device_status = status.get();
    KdaBwdParams b = pr.Bwd();
    b.cu_seqlens = dcu.get();
    b.device_status = status.get();
    ASSERT_TRUE(KdaForwardCuda(f, nullptr).ok());
    ASSERT_TRUE(kda_cuda::KdaBackwardChunkedCuda(b, nullptr).ok());
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    EXPECT_EQ(status.Download()[0] & kDeviceStatusBadCuSeqlens, kDeviceStatusBadCuSeqlens)
        << cu[0] << "," << cu[1] << "," << cu[3] << "," << cu[6];
  }
}

TEST(KdaKernels, RejectsBadArgumentsWithoutLaunching) {
  CAKEGRAD_REQUIRE_GPU();
  Problem pr(Packed({5, 6}, 1, false));
  KdaBwdParams b = pr.Bwd();
  b.workspace_bytes = KdaBackwardWorkspaceBytes(1, 11, 1, 2) - 1;
  EXPECT_EQ(KdaBackwardCuda(b, nullptr).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(kda_cuda::KdaBackwardChunkedCuda(b, nullptr).code(), StatusCode::kResourceExhausted);
  b = pr.Bwd();
  b.lower_bound = 0.0f;
  EXPECT_EQ(KdaBackwardCuda(b, nullptr).code(), StatusCode::kInvalidArgument);
  KdaFwdParams f = pr.Fwd();
  f.workspace_bytes = KdaForwardWorkspaceBytes(1, 11, 1, 2) - 1;
  EXPECT_EQ(KdaForwardCuda(f, nullptr).code(), StatusCode::kResourceExhausted);
  f = pr.Fwd();
  f.B = 2;
  EXPECT_EQ(KdaForwardCuda(f, nullptr).code(), StatusCode::kInvalidArgument);
  f = pr.Fwd();
  f.scale = -1.0f;
  EXPECT_EQ(KdaForwardCuda(f, nullptr).code(), StatusCode::kInvalidArgument);
  // Pointers the kernels access in 16-byte pieces, off by an element (or 8 bytes of workspace):
  // rejected by name before any launch, where the launch would fault and poison the context.
  auto rejects = [](const Status& st, const std::string& name) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(st.message().find("kda: " + name + " must be 16-byte aligned"), std::string::npos)
        << st.message();
  };
  f = pr.Fwd();
  f.q += 1;
  rejects(KdaForwardCuda(f, nullptr), "q");
  f = pr.Fwd();
  f.final_state += 1;
  rejects(KdaForwardCuda(f, nullptr), "final_state");
  f = pr.Fwd();
  f.workspace = static_cast<char*>(f.workspace) + 8;
  rejects(KdaForwardCuda(f, nullptr), "workspace");
  for (auto algorithm : {KdaBackwardAlgorithm::kSequential, KdaBackwardAlgorithm::kChunked}) {
    b = pr.Bwd();
    b.algorithm = algorithm;
    b.dv += 1;
    rejects(KdaBackwardCuda(b, nullptr), "dv");
    b = pr.Bwd();
    b.algorithm = algorithm;
    b.dinitial_state += 1;
    rejects(KdaBackwardCuda(b, nullptr), "dinitial_state");
    b = pr.Bwd();
    b.algorithm = algorithm;
    b.workspace = static_cast<char*>(b.workspace) + 8;
    rejects(KdaBackwardCuda(b, nullptr), "workspace");
  }
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace cakegrad::kernels
