// The CUDA conv1d kernels against an FP64 oracle (and the FP64 reference library), on fresh
// random inputs with every output poisoned first: SPEC.md section 2's accuracy contract, bitwise
// determinism (garbage workspaces, other streams, CUDA graphs, vector widths) and malformed
// cu_seqlens. Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cakegrad/kernels/conv1d.h"
#include "common/test_util.h"
#include "gpu/gpu_test_util.h"

namespace cakegrad {
namespace {

using kernels::Bf16ToFloat;
using kernels::Conv1dBwdParams;
using kernels::Conv1dFwdParams;
using kernels::DType;
using kernels::FloatToBf16;
using kernels::SiluGradPreactivation;
using testing::DeviceBuffer;

constexpr int W = kernels::kConv1dWidth;

// ---------------------------------------------------------------------------------------------
// Inputs.

template <typename F>
void ParallelFor(int64_t n, F&& f) {
  const int64_t threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < threads; ++i) {
    const int64_t b = i * chunk, e = std::min(n, b + chunk);
    if (b >= e) break;
    pool.emplace_back([&f, b, e, i] { f(b, e, i); });
  }
  for (auto& t : pool) t.join();
}

// Normal BF16 values, generated in parallel (tens of millions per test); fresh seeds per call.
std::vector<uint16_t> RandomBf16(int64_t n, double stddev = 1.0) {
  std::vector<uint16_t> out(static_cast<size_t>(n));
  const uint64_t seed = testing::Rng()();
  ParallelFor(n, [&](int64_t b, int64_t e, int64_t i) {
    std::mt19937_64 gen(seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
    std::normal_distribution<float> dist(0.0f, static_cast<float>(stddev));
    for (int64_t k = b; k < e; ++k) out[k] = FloatToBf16(dist(gen));
  });
  return out;
}

// N document lengths summing to S: empty ones (first and last possibly), 1-, 2- and 3-token
// ones, one long one (`long_doc` tokens when S allows), the rest random.
std::vector<int64_t> DocLengths(int64_t S, int n_docs, int64_t long_doc) {
  std::vector<int64_t> lengths = {0, 1, 2, 3, 0};
  int64_t used = 6;
  const int64_t big = std::min(long_doc, std::max<int64_t>(0, (S - used) * 9 / 10));
  lengths.push_back(big);
  used += big;
  const int rest = n_docs - static_cast<int>(lengths.size());
  std::uniform_int_distribution<int64_t> cut(0, S - used);
  std::vector<int64_t> cuts(static_cast<size_t>(rest - 1));
  for (auto& c : cuts) c = cut(testing::Rng());
  cuts.push_back(0);
  cuts.push_back(S - used);
  std::sort(cuts.begin(), cuts.end());
  for (int i = 0; i < rest; ++i) lengths.push_back(cuts[i + 1] - cuts[i]);
  std::shuffle(lengths.begin(), lengths.end(), testing::Rng());
  return lengths;
}

struct Route {
  bool bias = true;
  DType param_dtype = DType::kFP32;  // weight and bias
  DType grad_dtype = DType::kFP32;   // dweight and dbias
  DType cu_dtype = DType::kINT32;
};

std::string RouteName(const Route& r) {
  return std::string(r.bias ? "bias" : "nobias") + "_w" + kernels::DTypeName(r.param_dtype) +
         "_dw" + kernels::DTypeName(r.grad_dtype) + "_cu" + kernels::DTypeName(r.cu_dtype);
}

struct Problem {
  int64_t S = 0, C = 0;
  Route route;
  std::vector<int64_t> cu;
  std::vector<uint16_t> x, dy;
  std::vector<float> w, b;  // values the kernel sees (BF16-representable for BF16 parameters)
  int64_t docs() const { return static_cast<int64_t>(cu.size()) - 1; }
};

Problem MakeProblem(const std::vector<int64_t>& lengths, int64_t C, const Route& route) {
  Problem p;
  p.C = C;
  p.route = route;
  p.cu.push_back(0);
  for (int64_t len : lengths) p.cu.push_back(p.cu.back() + len);
  p.S = p.cu.back();
  p.x = RandomBf16(p.S * C);
  p.dy = RandomBf16(p.S * C);
  p.w = testing::RandomFloat(static_cast<size_t>(C * W), 0.0, 0.5);
  p.b = testing::RandomFloat(static_cast<size_t>(C), 0.0, 0.5);
  if (route.param_dtype == DType::kBF16) {
    for (auto& v : p.w) v = Bf16ToFloat(FloatToBf16(v));
    for (auto& v : p.b) v = Bf16ToFloat(FloatToBf16(v));
  }
  if (!route.bias) std::fill(p.b.begin(), p.b.end(), 0.0f);
  return p;
}

// ---------------------------------------------------------------------------------------------
// Device side: a problem's buffers and the calls.

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<uint8_t> ParamBytes(const std::vector<float>& v, DType dtype) {
  if (dtype == DType::kFP32) return Bytes(v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = FloatToBf16(v[i]);
  return Bytes(h);
}

std::vector<uint8_t> CuBytes(const std::vector<int64_t>& cu, DType dtype) {
  if (dtype == DType::kINT64) return Bytes(cu);
  return Bytes(std::vector<int32_t>(cu.begin(), cu.end()));
}

std::vector<uint16_t> Padded(const std::vector<uint16_t>& v, int pad) {
  std::vector<uint16_t> out(v.size() + pad, 0);
  std::copy(v.begin(), v.end(), out.begin() + pad);
  return out;
}

// A problem's device buffers. `pad` extra elements in front of every activation buffer: the
// calls use base + pad, which changes the alignment the kernels see (1: 2-byte, 2: 4-byte, 4:
// 8-byte, 0: 256-byte).
struct DeviceProblem {
  DeviceProblem(const Problem& p, int pad = 0)
      : x(Padded(p.x, pad)),
        dy(Padded(p.dy, pad)),
        dx(p.x.size() + pad),
        y(p.x.size() + pad),
        weight(ParamBytes(p.w, p.route.param_dtype)),
        bias(ParamBytes(p.b, p.route.param_dtype)),
        cu(CuBytes(p.cu, p.route.cu_dtype)),
        dweight(static_cast<size_t>(p.C * W * kernels::DTypeBytes(p.route.grad_dtype))),
        dbias(static_cast<size_t>(p.C * kernels::DTypeBytes(p.route.grad_dtype))),
        workspace(static_cast<size_t>(kernels::Conv1dBackwardWorkspaceBytes(p.S, p.C))),
        status(1) {
    status.Fill(0);
  }
  DeviceBuffer<uint16_t> x, dy, dx, y;
  DeviceBuffer<uint8_t> weight, bias, cu;
  DeviceBuffer<uint8_t> dweight, dbias, workspace;
  DeviceBuffer<uint32_t> status;
};

Conv1dFwdParams FwdParams(const Problem& p, const DeviceProblem& d, int pad = 0) {
  Conv1dFwdParams f;
  f.x = d.x.get() + pad;
  f.weight = d.weight.get();
  f.weight_dtype = p.route.param_dtype;
  f.bias = p.route.bias ? d.bias.get() : nullptr;
  f.bias_dtype = p.route.param_dtype;
  f.cu_seqlens = d.cu.get();
  f.seqlens_dtype = p.route.cu_dtype;
  f.y = d.y.get() + pad;
  f.S = p.S;
  f.C = p.C;
  f.num_docs = p.docs();
  f.device_status = d.status.get();
  return f;
}

Conv1dBwdParams BwdParams(const Problem& p, const DeviceProblem& d, SiluGradPreactivation policy,
                          int pad = 0) {
  Conv1dBwdParams b;
  b.x = d.x.get() + pad;
  b.weight = d.weight.get();
  b.weight_dtype = p.route.param_dtype;
  b.bias = p.route.bias ? d.bias.get() : nullptr;
  b.bias_dtype = p.route.param_dtype;
  b.cu_seqlens = d.cu.get();
  b.seqlens_dtype = p.route.cu_dtype;
  b.dy = d.dy.get() + pad;
  b.policy = policy;
  b.dx = d.dx.get() + pad;
  b.dweight = d.dweight.get();
  b.dweight_dtype = p.route.grad_dtype;
  b.dbias = p.route.bias ? d.dbias.get() : nullptr;
  b.dbias_dtype = p.route.grad_dtype;
  b.workspace = d.workspace.get();
  b.workspace_bytes = static_cast<int64_t>(d.workspace.size());
  b.S = p.S;
  b.C = p.C;
  b.num_docs = p.docs();
  b.device_status = d.status.get();
  return b;
}

std::vector<double> GradToDouble(const std::vector<uint8_t>& bytes, DType dtype) {
  std::vector<double> out;
  if (dtype == DType::kFP32) {
    std::vector<float> f(bytes.size() / 4);
    std::memcpy(f.data(), bytes.data(), bytes.size());
    out.assign(f.begin(), f.end());
  } else {
    std::vector<uint16_t> h(bytes.size() / 2);
    std::memcpy(h.data(), bytes.data(), bytes.size());
    out = testing::Bf16ToDouble(h);
  }
  return out;
}

// Outputs of one backward call, copied back.
struct BwdOut {
  std::vector<uint16_t> dx;
  std::vector<uint8_t> dweight, dbias;
};

BwdOut RunBackward(const Problem& p, DeviceProblem* d, SiluGradPreactivation policy,
                   cudaStream_t stream = nullptr, int pad = 0) {
  d->dx.Fill(0xFF);
  d->dweight.Fill(0xFF);
  d->dbias.Fill(0xFF);
  d->workspace.Fill(0xFF);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the fills run on the legacy stream
  const kernels::Status s = kernels::Conv1dBackwardCuda(BwdParams(p, *d, policy, pad), stream);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  BwdOut out;
  std::vector<uint16_t> dx = d->dx.Download();
  out.dx.assign(dx.begin() + pad, dx.end());
  out.dweight = d->dweight.Download();
  out.dbias = d->dbias.Download();
  return out;
}

std::vector<uint16_t> RunForward(const Problem& p, DeviceProblem* d, cudaStream_t stream = nullptr,
                                 int pad = 0) {
  d->y.Fill(0xFF);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const kernels::Status s = kernels::Conv1dForwardCuda(FwdParams(p, *d, pad), stream);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<uint16_t> y = d->y.Download();
  return std::vector<uint16_t>(y.begin() + pad, y.end());
}

// ---------------------------------------------------------------------------------------------
// The FP64 oracle, streamed: it walks every document and compares as it goes, so problems of
// tens of millions of elements need no FP64 copies of the outputs.

double Ulp(double exact) {
  const double mag = std::fabs(exact);
  return mag < 1e-38 ? std::ldexp(1.0, -133) : std::ldexp(1.0, std::ilogb(mag) - 7);
}

struct ElementStats {
  double err2 = 0, ref2 = 0;
  int64_t count = 0, bad = 0;
  double worst = 0;  // largest |got - exact| / allowed
  std::string first_bad;
  std::string bad_at;  // [t, c] of the first eight (after merges: roughly) outside the bound

  // `allowed`: the per-element bound; exact values also feed rel-L2.
  void Add(double got, double exact, double allowed, int64_t t, int64_t c) {
    ++count;
    const double e = std::isfinite(got) ? got - exact : INFINITY;
    err2 += e * e;
    ref2 += exact * exact;
    const double ratio = std::fabs(e) / allowed;
    worst = std::max(worst, ratio);
    if (!(ratio <= 1.0)) {
      if (bad < 8) bad_at += "[" + std::to_string(t) + ", " + std::to_string(c) + "] ";
      if (bad++ == 0) {
        first_bad = "[" + std::to_string(t) + ", " + std::to_string(c) + "] got " +
                    std::to_string(got) + " exact " + std::to_string(exact) + " allowed " +
                    std::to_string(allowed);
      }
    }
  }
  void Merge(const ElementStats& o) {
    err2 += o.err2;
    ref2 += o.ref2;
    count += o.count;
    if (bad == 0) first_bad = o.first_bad;
    if (bad < 8) bad_at += o.bad_at;
    bad += o.bad;
    worst = std::max(worst, o.worst);
  }
  double RelL2() const { return ref2 == 0 ? (err2 == 0 ? 0 : INFINITY) : std::sqrt(err2 / ref2); }
};

struct OracleResult {
  // dx is checked element by element against FP64 math whose SiLU' is taken at the
  // preactivation the kernel itself used: its FP32 pre ("fp32"), or that rounded to BF16
  // ("bf16"). The FP32 pre differs from the FP64 one by a few FP32 ulps, which moves dpre by an
  // amount not proportional to dpre (where SiLU' crosses zero), and can move the rounded BF16 pre
  // to the neighbouring value: the SPEC's per-element bound cannot absorb either, so the
  // "_pure" stats against the all-FP64 value carry the rel-L2 checks and count the rare
  // elements outside the bound.
  ElementStats y;             // forward, against FP64
  ElementStats dx_fp32;       // "fp32": 1 ulp + 2^-18 sum|w dpre|, SiLU' at the kernel's pre
  ElementStats dx_fp32_pure;  // "fp32": the same against SiLU' at the FP64 pre
  ElementStats dx_bf16;       // "bf16": 2 ulp + 2^-18 sum|w dpre|, SiLU' at bf16(kernel pre)
  ElementStats dx_bf16_pure;  // "bf16": the same against SiLU' at bf16(FP64 pre)
  std::vector<double> dw_fp32, db_fp32, dw_bf16, db_bf16;  // exact parameter gradients
  // sqrt(sum over tokens of term^2) per parameter gradient: the size of a sum of random-sign
  // terms, which the exact sum itself can undershoot by chance when there are few channels.
  std::vector<double> dw_scale, db_scale;
};

double SiluGrad(double v) {
  const double s = 1.0 / (1.0 + std::exp(-v));
  return s * (1.0 + v * (1.0 - s));
}
double RoundBf16(double v) { return Bf16ToFloat(kernels::DoubleToBf16(v)); }

// Any of y / dx_bf16 / dx_fp32 may be empty (not checked).
OracleResult Oracle(const Problem& p, const std::vector<uint16_t>& y,
                    const std::vector<uint16_t>& dx_bf16, const std::vector<uint16_t>& dx_fp32) {
  const int64_t C = p.C;
  constexpr int64_t kBlock = 32;
  const int64_t blocks = (C + kBlock - 1) / kBlock;
  std::vector<OracleResult> parts(static_cast<size_t>(blocks));
  OracleResult out;
  out.dw_fp32.assign(C * W, 0.0);
  out.dw_bf16.assign(C * W, 0.0);
  out.db_fp32.assign(C, 0.0);
  out.db_bf16.assign(C, 0.0);
  out.dw_scale.assign(C * W, 0.0);
  out.db_scale.assign(C, 0.0);
  ParallelFor(blocks, [&](int64_t bb, int64_t be, int64_t) {
    for (int64_t blk = bb; blk < be; ++blk) {
      OracleResult& r = parts[blk];
      const int64_t c_begin = blk * kBlock, c_end = std::min(C, c_begin + kBlock);
      const int64_t nb = c_end - c_begin;
      // dpre of tokens t..t+3 (ring by token), SiLU' at: FP64 pre, bf16(FP64 pre),
      // bf16(kernel pre), kernel pre.
      constexpr int kKinds = 4;
      std::vector<double> ring(static_cast<size_t>(kKinds * 4 * nb));
      auto at = [&](int which, int64_t t, int64_t ci) -> double& {
        return ring[(which * 4 + (t & 3)) * nb + ci];
      };
      for (int64_t d = 0; d < p.docs(); ++d) {
        const int64_t start = p.cu[d], end = p.cu[d + 1];
        for (int64_t t = end - 1; t >= start; --t) {
          for (int64_t c = c_begin; c < c_end; ++c) {
            const int64_t ci = c - c_begin;
            float xs[W];
            for (int k = 0; k < W; ++k) {
              const int64_t src = t - (W - 1) + k;
              xs[k] = src >= start ? Bf16ToFloat(p.x[src * C + c]) : 0.0f;
            }
            const float* wc = &p.w[c * W];
            double pre = p.b[c], mag = std::fabs(p.b[c]);
            for (int k = 0; k < W; ++k) {
              pre += static_cast<double>(wc[k]) * xs[k];
              mag += std::fabs(static_cast<double>(wc[k]) * xs[k]);
            }
            // The kernel's FP32 preactivation, same operations in the same order.
            float pre32 = std::fmaf(wc[0], xs[0], p.b[c]);
            for (int k = 1; k < W; ++k) pre32 = std::fmaf(wc[k], xs[k], pre32);
            const int64_t i = t * C + c;
            if (!y.empty()) {
              const double ye = pre / (1.0 + std::exp(-pre));
              r.y.Add(Bf16ToFloat(y[i]), ye, Ulp(ye) + std::ldexp(mag, -20), t, c);
            }
            const double dyv = Bf16ToFloat(p.dy[i]);
            at(0, t, ci) = dyv * SiluGrad(pre);
            at(1, t, ci) = dyv * SiluGrad(RoundBf16(pre));
            at(2, t, ci) = dyv * SiluGrad(Bf16ToFloat(FloatToBf16(pre32)));
            at(3, t, ci) = dyv * SiluGrad(pre32);
            double dxe[kKinds] = {}, bound[kKinds] = {};
            const int64_t ahead = std::min<int64_t>(W - 1, end - 1 - t);
            for (int64_t j = 0; j <= ahead; ++j) {
              for (int which = 0; which < kKinds; ++which) {
                const double term = wc[W - 1 - j] * at(which, t + j, ci);
                dxe[which] += term;
                bound[which] += std::fabs(term);
              }
            }
            if (!dx_fp32.empty()) {
              const double got = Bf16ToFloat(dx_fp32[i]);
              r.dx_fp32.Add(got, dxe[3], Ulp(dxe[3]) + std::ldexp(bound[3], -18), t, c);
              r.dx_fp32_pure.Add(got, dxe[0], Ulp(dxe[0]) + std::ldexp(bound[0], -18), t, c);
            }
            if (!dx_bf16.empty()) {
              const double got = Bf16ToFloat(dx_bf16[i]);
              r.dx_bf16.Add(got, dxe[2], 2 * Ulp(dxe[2]) + std::ldexp(bound[2], -18), t, c);
              r.dx_bf16_pure.Add(got, dxe[1], 2 * Ulp(dxe[1]) + std::ldexp(bound[1], -18), t, c);
            }
            // SiLU' at the policy's preactivation, as for dx: the kernel's FP32 pre ("fp32")
            // or bf16 of it ("bf16"). bf16 of the FP64 pre rounds the other way for about one
            // token in 2^16 and moves its term by ~2^-8 (a BF16 dweight element was 2.5 ulp
            // from that value on the H200, 2026-11-29); near SiLU''s zero the FP32 and FP64
            // pres give SiLU' values apart by far more than 1e-6 (Conv1dGpuNearSiluGradZero).
            for (int k = 0; k < W; ++k) {
              const double term = at(0, t, ci) * xs[k];
              out.dw_fp32[c * W + k] += at(3, t, ci) * xs[k];
              out.dw_bf16[c * W + k] += at(2, t, ci) * xs[k];
              out.dw_scale[c * W + k] += term * term;
            }
            out.db_fp32[c] += at(3, t, ci);
            out.db_bf16[c] += at(2, t, ci);
            out.db_scale[c] += at(0, t, ci) * at(0, t, ci);
          }
        }
      }
    }
  });
  for (const OracleResult& r : parts) {
    out.y.Merge(r.y);
    out.dx_fp32.Merge(r.dx_fp32);
    out.dx_fp32_pure.Merge(r.dx_fp32_pure);
    out.dx_bf16.Merge(r.dx_bf16);
    out.dx_bf16_pure.Merge(r.dx_bf16_pure);
  }
  return out;
}

// Parameter gradients. FP32 outputs: rel-L2 against the exact values, and the same error over
// the size of the sums (`scale`), which stays meaningful for tensors of a handful of elements
// whose exact sums may nearly cancel (C = 1: dbias is one number); the plain rel-L2 is enforced
// from 256 elements on. BF16 outputs: one rounding of the exact value.
void ExpectParamGrads(const char* what, const std::vector<double>& got,
                      const std::vector<double>& exact, const std::vector<double>& scale2,
                      DType dtype, double limit) {
  const double rel = testing::RelL2(got, exact);
  double err2 = 0, scale_sum = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err2 += (got[i] - exact[i]) * (got[i] - exact[i]);
    scale_sum += scale2[i];
  }
  const double rel_scale = std::isfinite(err2) ? std::sqrt(err2 / scale_sum) : INFINITY;
  if (dtype == DType::kFP32) {
    EXPECT_LE(rel_scale, limit) << what;
    if (got.size() >= 256) EXPECT_LE(rel, limit) << what;
  } else {
    EXPECT_LE(rel_scale, 4e-3) << what;
    // One rounding of a value within the policy's error (relative to the sum's size) of exact.
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_LE(std::fabs(got[i] - exact[i]), Ulp(exact[i]) + limit * std::sqrt(scale2[i]))
          << what << "[" << i << "] = " << got[i] << ", exact " << exact[i];
    }
  }
  std::printf("    %-14s rel-L2 %.3e, over the sums' size %.3e (limit %.0e, %s)\n", what, rel,
              rel_scale, limit, kernels::DTypeName(dtype));
}

// Runs forward and both backward policies on the GPU and checks all against the oracle.
// `fp64_pre_counts`: also bound how many dx elements miss the value at the FP64 preactivation
// (off where most preactivations sit near SiLU''s zero: there one FP32 ulp of the preactivation,
// or a BF16 rounding flip of it, moves SiLU' by far more than a BF16 ulp; the policies' own
// per-element checks, at the kernel's preactivation as SPEC defines exact, stay).
// `max_dx_worst`: the largest share of its bound any dx element may use (1: SPEC's bound).
void CheckAll(const Problem& p, bool fp64_pre_counts = true, double max_dx_worst = 1.0) {
  DeviceProblem d(p);
  const std::vector<uint16_t> y = RunForward(p, &d);
  const BwdOut b16 = RunBackward(p, &d, SiluGradPreactivation::kBF16);
  const BwdOut b32 = RunBackward(p, &d, SiluGradPreactivation::kFP32);
  EXPECT_EQ(d.status.Download()[0], 0u) << "valid cu_seqlens flagged as malformed";
  const OracleResult o = Oracle(p, y, b16.dx, b32.dx);
  std::printf("  S=%lld C=%lld docs=%lld %s\n", static_cast<long long>(p.S),
              static_cast<long long>(p.C), static_cast<long long>(p.docs()),
              RouteName(p.route).c_str());
  auto report = [](const char* what, const ElementStats& s, double rel_limit) {
    std::printf("    %-14s rel-L2 %.3e (limit %.0e), %lld/%lld outside the bound, worst %.3f%s%s\n",
                what, s.RelL2(), rel_limit, static_cast<long long>(s.bad),
                static_cast<long long>(s.count), s.worst, s.bad > 0 ? ", at " : "",
                s.bad_at.c_str());
    EXPECT_LE(s.RelL2(), rel_limit) << what;
  };
  report("y", o.y, 4e-3);
  report("dx fp32", o.dx_fp32, 2e-3);
  report("dx fp32 (FP64)", o.dx_fp32_pure, 2e-3);
  report("dx bf16", o.dx_bf16, 2e-3);
  if (fp64_pre_counts) report("dx bf16 (FP64)", o.dx_bf16_pure, 2e-3);
  EXPECT_EQ(o.y.bad, 0) << "first: " << o.y.first_bad;
  EXPECT_EQ(o.dx_fp32.bad, 0) << "first: " << o.dx_fp32.first_bad;
  EXPECT_EQ(o.dx_bf16.bad, 0) << "first: " << o.dx_bf16.first_bad;
  EXPECT_LE(o.dx_fp32.worst, max_dx_worst) << "dx fp32";
  EXPECT_LE(o.dx_bf16.worst, max_dx_worst) << "dx bf16";
  // Measured on the H200 (2026-11-29): at most 2 of 49M ("fp32") and 51 of 49M ("bf16"). One
  // preactivation that FP32 and FP64 round to neighbouring BF16 values enters the four dx
  // elements dx[t - 3 .. t, c], so the floor is one such flip (4), not one element: a fresh draw
  // at S = 4099, C = 7 failed the floor of 1 with 3 of 28693 (H200, 2026-11-30, eighteenth
  // session; which elements was not printed then, so whether they share a flip is not known).
  if (fp64_pre_counts) {
    EXPECT_LE(o.dx_fp32_pure.bad, 4 + o.dx_fp32_pure.count / 100000)
        << "first: " << o.dx_fp32_pure.first_bad << "; at " << o.dx_fp32_pure.bad_at;
    EXPECT_LE(o.dx_bf16_pure.bad, 4 + o.dx_bf16_pure.count / 100000)
        << "first: " << o.dx_bf16_pure.first_bad << "; at " << o.dx_bf16_pure.bad_at;
  }
  ASSERT_EQ(o.dx_fp32.count, p.S * p.C);

  const DType g = p.route.grad_dtype;
  ExpectParamGrads("dweight bf16", GradToDouble(b16.dweight, g), o.dw_bf16, o.dw_scale, g, 1e-4);
  ExpectParamGrads("dweight fp32", GradToDouble(b32.dweight, g), o.dw_fp32, o.dw_scale, g, 1e-6);
  if (p.route.bias) {
    ExpectParamGrads("dbias bf16", GradToDouble(b16.dbias, g), o.db_bf16, o.db_scale, g, 1e-4);
    ExpectParamGrads("dbias fp32", GradToDouble(b32.dbias, g), o.db_fp32, o.db_scale, g, 1e-6);
  } else {
    // Without bias nothing may be written to dbias.
    for (uint8_t v : b32.dbias) ASSERT_EQ(v, 0xFF);
  }
}

// Preactivations within a few 1e-3 of p0 = -1.27846, the zero of SiLU''s factor 1 + p (1 - s),
// where that sum cancels: both policies must still keep every dx within SPEC's bound. Before
// the kernel's Taylor form there, one "fp32" dx element in ~47M of random inputs missed it
// (2026-11-29, twice in three H200 runs), and before "bf16" took that form too, one "bf16" dx
// element in 20.5M here (once in five runs); most elements sit in that range, multi-term and
// single-term (documents' last tokens) alike, and "bf16" rounds them to the two BF16 values
// nearest p0. With the Taylor form the worst element is the final BF16 rounding alone (0.5 of the
// "fp32" bound, 0.25 of the "bf16" one, on the H200); without it "bf16" reached 0.79-1.03 in
// five runs, so 0.6 catches a regression on every run rather than one in five.
TEST(Conv1dGpuNearSiluGradZero, BothPoliciesKeepEveryDxWithinTheBound) {
  CAKEGRAD_REQUIRE_GPU();
  constexpr Route kRoute{true, DType::kFP32, DType::kFP32, DType::kINT32};
  Problem p = MakeProblem(DocLengths(20000, 64, 2000), 1024, kRoute);
  p.w = testing::RandomFloat(p.w.size(), 0.0, 1e-3);
  p.b = testing::RandomFloat(p.b.size(), -1.2784645, 2e-3);
  CheckAll(p, /*fp64_pre_counts=*/false, /*max_dx_worst=*/0.6);
}

// ---------------------------------------------------------------------------------------------
// Accuracy over shapes and routes.

struct ShapeCase {
  const char* name;
  int64_t C;
  int64_t S;
  int docs;  // 1: one document of S tokens; else DocLengths(S, docs, 10007)
  Route route;
};

class Conv1dGpuShapes : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(Conv1dGpuShapes, MatchesFp64) {
  CAKEGRAD_REQUIRE_GPU();
  const ShapeCase sc = GetParam();
  const std::vector<int64_t> lengths =
      sc.docs == 1 ? std::vector<int64_t>{sc.S} : DocLengths(sc.S, sc.docs, 10007);
  CheckAll(MakeProblem(lengths, sc.C, sc.route));
}

constexpr Route kF32{true, DType::kFP32, DType::kFP32, DType::kINT32};
constexpr Route kBf16Params{true, DType::kBF16, DType::kFP32, DType::kINT64};
constexpr Route kBf16Grads{true, DType::kFP32, DType::kBF16, DType::kINT32};
constexpr Route kNoBias{false, DType::kFP32, DType::kFP32, DType::kINT64};
constexpr Route kNoBiasBf16{false, DType::kBF16, DType::kBF16, DType::kINT32};

INSTANTIATE_TEST_SUITE_P(
    Sweep, Conv1dGpuShapes,
    ::testing::Values(ShapeCase{"C1_S1M_64docs", 1, 1 << 20, 64, kF32},
                      ShapeCase{"C1_one_doc", 1, (1 << 20) - 3, 1, kNoBiasBf16},
                      ShapeCase{"C7_S1M_64docs", 7, 1 << 20, 64, kBf16Params},
                      ShapeCase{"C7_one_doc", 7, 4099, 1, kNoBias},
                      ShapeCase{"C64_64docs", 64, 65536 + 77, 64, kBf16Grads},
                      ShapeCase{"C64_one_doc", 64, 20000, 1, kF32},
                      ShapeCase{"C200_64docs", 200, 12000, 64, kNoBias},
                      ShapeCase{"C4096_64docs", 4096, 12000, 64, kF32},
                      ShapeCase{"C4096_64docs_bf16", 4096, 11500, 64, kBf16Params},
                      ShapeCase{"C4096_one_doc", 4096, 3001, 1, kNoBiasBf16},
                      ShapeCase{"C12288_16docs", 12288, 1500, 16, kBf16Grads},
                      ShapeCase{"C12288_one_doc", 12288, 700, 1, kNoBias}),
    [](const ::testing::TestParamInfo<ShapeCase>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Determinism: the same bits whatever the workspace held, on another stream, next to other
// work, replayed from a CUDA graph, and whatever vector width the pointers' alignment allows.

struct AllBits {
  std::vector<uint16_t> y;
  BwdOut b16, b32;
};

void ExpectSameBwdBits(const BwdOut& a, const BwdOut& b, const std::string& what) {
  EXPECT_TRUE(a.dx == b.dx) << what << ": dx differs";
  EXPECT_TRUE(a.dweight == b.dweight) << what << ": dweight differs";
  EXPECT_TRUE(a.dbias == b.dbias) << what << ": dbias differs";
}

void ExpectSameBits(const AllBits& a, const AllBits& b, const std::string& what) {
  EXPECT_TRUE(a.y == b.y) << what << ": y differs";
  ExpectSameBwdBits(a.b16, b.b16, what + " (bf16)");
  ExpectSameBwdBits(a.b32, b.b32, what + " (fp32)");
}

AllBits RunAll(const Problem& p, DeviceProblem* d, cudaStream_t stream, int pad = 0) {
  AllBits out;
  out.y = RunForward(p, d, stream, pad);
  out.b16 = RunBackward(p, d, SiluGradPreactivation::kBF16, stream, pad);
  out.b32 = RunBackward(p, d, SiluGradPreactivation::kFP32, stream, pad);
  return out;
}

class Conv1dGpuDeterminism : public ::testing::TestWithParam<int64_t> {};

TEST_P(Conv1dGpuDeterminism, BitwiseAcrossWorkspacesStreamsGraphsAndAlignment) {
  CAKEGRAD_REQUIRE_GPU();
  const int64_t C = GetParam();
  const int64_t S = C >= 1024 ? 8192 : 200000;
  const Problem p = MakeProblem(DocLengths(S, 16, 5000), C, kF32);
  DeviceProblem d(p);
  const AllBits base = RunAll(p, &d, nullptr);

  // Garbage workspaces: the kernels must not read what they did not write.
  for (uint8_t fill : {0x00, 0x5A, 0xC3}) {
    for (SiluGradPreactivation policy :
         {SiluGradPreactivation::kBF16, SiluGradPreactivation::kFP32}) {
      d.dx.Fill(0xFF);
      d.dweight.Fill(0xFF);
      d.dbias.Fill(0xFF);
      d.workspace.Fill(fill);
      CUDA_ASSERT_OK(cudaDeviceSynchronize());
      ASSERT_TRUE(kernels::Conv1dBackwardCuda(BwdParams(p, d, policy), nullptr).ok());
      CUDA_ASSERT_OK(cudaDeviceSynchronize());
      const BwdOut out{d.dx.Download(), d.dweight.Download(), d.dbias.Download()};
      ExpectSameBwdBits(policy == SiluGradPreactivation::kBF16 ? base.b16 : base.b32, out,
                        "workspace filled with " + std::to_string(fill));
    }
  }

  // Another stream, with large copies running concurrently on a third one.
  cudaStream_t s1, s2;
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CUDA_ASSERT_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  ExpectSameBits(base, RunAll(p, &d, s1), "other stream");
  {
    DeviceBuffer<uint8_t> big_a(256u << 20), big_b(256u << 20);
    big_a.Fill(0x11);
    d.dx.Fill(0xFF);
    d.dweight.Fill(0xFF);
    d.dbias.Fill(0xFF);
    d.workspace.Fill(0x77);
    d.y.Fill(0xFF);
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    for (int i = 0; i < 4; ++i) {
      CUDA_ASSERT_OK(
          cudaMemcpyAsync(big_b.get(), big_a.get(), big_a.bytes(), cudaMemcpyDeviceToDevice, s2));
    }
    ASSERT_TRUE(kernels::Conv1dForwardCuda(FwdParams(p, d), s1).ok());
    ASSERT_TRUE(
        kernels::Conv1dBackwardCuda(BwdParams(p, d, SiluGradPreactivation::kBF16), s1).ok());
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    EXPECT_TRUE(d.y.Download() == base.y) << "next to concurrent copies: y differs";
    ExpectSameBwdBits(base.b16, BwdOut{d.dx.Download(), d.dweight.Download(), d.dbias.Download()},
                      "next to concurrent copies");
  }

  // Captured into a CUDA graph (PDL edge included) and replayed twice.
  {
    d.dx.Fill(0xFF);
    d.dweight.Fill(0xFF);
    d.dbias.Fill(0xFF);
    d.workspace.Fill(0xA5);
    d.y.Fill(0xFF);
    CUDA_ASSERT_OK(cudaDeviceSynchronize());
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_ASSERT_OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
    const bool fwd_ok = kernels::Conv1dForwardCuda(FwdParams(p, d), s1).ok();
    const bool bwd_ok =
        kernels::Conv1dBackwardCuda(BwdParams(p, d, SiluGradPreactivation::kFP32), s1).ok();
    CUDA_ASSERT_OK(cudaStreamEndCapture(s1, &graph));
    ASSERT_TRUE(fwd_ok && bwd_ok);
    CUDA_ASSERT_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      d.workspace.Fill(static_cast<uint8_t>(0x3C + replay));
      CUDA_ASSERT_OK(cudaDeviceSynchronize());
      CUDA_ASSERT_OK(cudaGraphLaunch(exec, s1));
      CUDA_ASSERT_OK(cudaStreamSynchronize(s1));
      EXPECT_TRUE(d.y.Download() == base.y) << "graph replay " << replay << ": y";
      EXPECT_TRUE(d.dx.Download() == base.b32.dx) << "graph replay " << replay << ": dx";
      EXPECT_TRUE(d.dweight.Download() == base.b32.dweight) << "graph replay " << replay;
      EXPECT_TRUE(d.dbias.Download() == base.b32.dbias) << "graph replay " << replay;
    }
    CUDA_ASSERT_OK(cudaGraphExecDestroy(exec));
    CUDA_ASSERT_OK(cudaGraphDestroy(graph));
  }
  CUDA_ASSERT_OK(cudaStreamDestroy(s1));
  CUDA_ASSERT_OK(cudaStreamDestroy(s2));

  // Offsets of 4, 2 and 1 elements force the 8-, 4- and 2-byte vector routes (when C allows
  // 16).
  for (int pad : {4, 2, 1}) {
    DeviceProblem dp(p, pad);
    ExpectSameBits(base, RunAll(p, &dp, nullptr, pad),
                   "pointers offset by " + std::to_string(pad) + " elements");
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, Conv1dGpuDeterminism, ::testing::Values(8, 64, 4096));

// ---------------------------------------------------------------------------------------------
// Malformed cu_seqlens, empty inputs, arguments.

void ExpectMalformedFlagged(const Problem& p, const std::vector<int64_t>& bad_cu, DType cu_dtype) {
  Problem q = p;
  q.route.cu_dtype = cu_dtype;
  DeviceProblem d(q);
  const DeviceBuffer<uint8_t> bad(CuBytes(bad_cu, cu_dtype));
  Conv1dFwdParams f = FwdParams(q, d);
  Conv1dBwdParams b = BwdParams(q, d, SiluGradPreactivation::kBF16);
  f.cu_seqlens = b.cu_seqlens = bad.get();
  f.num_docs = b.num_docs = static_cast<int64_t>(bad_cu.size()) - 1;
  std::string cu_text;
  for (int64_t v : bad_cu) cu_text += std::to_string(v) + " ";
  for (int which = 0; which < 2; ++which) {
    d.status.Fill(0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const kernels::Status s = which == 0 ? kernels::Conv1dForwardCuda(f, nullptr)
                                         : kernels::Conv1dBackwardCuda(b, nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "cu_seqlens " << cu_text;
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(d.status.Download()[0], kernels::kDeviceStatusBadCuSeqlens)
        << (which == 0 ? "forward" : "backward") << ", cu_seqlens " << cu_text;
  }
}

std::vector<std::vector<int64_t>> MalformedOffsets(int64_t S) {
  return {{1, S / 2, S},     {0, S / 2, S / 4, S}, {0, S / 2, S - 1},
          {0, S / 2, S + 5}, {0, -7, S},           {0, S + 1000000, S},
          {0, INT32_MAX, S}, {-5, S / 3, S},       {0, S / 2, S / 2, 0}};
}

TEST(Conv1dGpu, MalformedCuSeqlensAreFlaggedNotFatal) {
  CAKEGRAD_REQUIRE_GPU();
  for (int64_t C : {3, 64, 4096}) {
    const Problem p = MakeProblem({300, 211}, C, kF32);
    for (const auto& cu : MalformedOffsets(p.S)) {
      ExpectMalformedFlagged(p, cu, DType::kINT32);
      ExpectMalformedFlagged(p, cu, DType::kINT64);
    }
    // No documents at all while S > 0 is malformed too.
    ExpectMalformedFlagged(p, {0}, DType::kINT64);
  }
}

TEST(Conv1dGpu, EmptyInputZeroesParameterGradients) {
  CAKEGRAD_REQUIRE_GPU();
  for (const auto& lengths : {std::vector<int64_t>{}, std::vector<int64_t>{0, 0, 0}}) {
    for (const Route& route : {kF32, kBf16Grads}) {
      const Problem p = MakeProblem(lengths, 37, route);
      DeviceProblem d(p);
      const BwdOut out = RunBackward(p, &d, SiluGradPreactivation::kFP32);
      for (uint8_t v : out.dweight) ASSERT_EQ(v, 0);
      for (uint8_t v : out.dbias) ASSERT_EQ(v, 0);
      EXPECT_TRUE(kernels::Conv1dForwardCuda(FwdParams(p, d), nullptr).ok());
      EXPECT_EQ(kernels::Conv1dBackwardWorkspaceBytes(0, 37), 0);
    }
  }
}

TEST(Conv1dGpu, RejectsBadArgumentsWithoutLaunching) {
  CAKEGRAD_REQUIRE_GPU();
  const Problem p = MakeProblem({100}, 16, kF32);
  DeviceProblem d(p);
  Conv1dBwdParams small = BwdParams(p, d, SiluGradPreactivation::kBF16);
  small.workspace_bytes -= 4;
  EXPECT_EQ(kernels::Conv1dBackwardCuda(small, nullptr).code(),
            kernels::StatusCode::kInvalidArgument);
  Conv1dBwdParams no_dbias = BwdParams(p, d, SiluGradPreactivation::kBF16);
  no_dbias.dbias = nullptr;
  EXPECT_EQ(kernels::Conv1dBackwardCuda(no_dbias, nullptr).code(),
            kernels::StatusCode::kInvalidArgument);
  Conv1dBwdParams bad_policy = BwdParams(p, d, SiluGradPreactivation::kBF16);
  bad_policy.policy = static_cast<SiluGradPreactivation>(7);
  EXPECT_EQ(kernels::Conv1dBackwardCuda(bad_policy, nullptr).code(),
            kernels::StatusCode::kInvalidArgument);
  Conv1dFwdParams bad_cu = FwdParams(p, d);
  bad_cu.seqlens_dtype = DType::kFP32;
  EXPECT_EQ(kernels::Conv1dForwardCuda(bad_cu, nullptr).code(),
            kernels::StatusCode::kInvalidArgument);
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
}

// ---------------------------------------------------------------------------------------------
// Small problems for compute-sanitizer (memcheck, racecheck): odd widths, 1-token and empty
// documents, the reference library as oracle, and malformed offsets. C = 256 takes the
// backward's paired-copy route (lanes fill each other's ring slots under __syncwarp); C = 128
// must not (a warp holds two 64-channel segments there). The last, 300-token document gives some
// backward segments a window without a document start (the walk's no-boundary body).

TEST(Conv1dGpuSanitize, SmallProblemsAgainstReferenceAndMalformedOffsets) {
  CAKEGRAD_REQUIRE_GPU();
  for (int64_t C : {1, 7, 24, 72, 128, 256}) {
    for (const Route& route : {kF32, kNoBiasBf16, kBf16Params}) {
      const Problem p = MakeProblem({0, 1, 130, 2, 0, 3, 77, 4, 300}, C, route);
      DeviceProblem d(p);
      const std::vector<uint16_t> y = RunForward(p, &d);
      for (SiluGradPreactivation policy :
           {SiluGradPreactivation::kBF16, SiluGradPreactivation::kFP32}) {
        const BwdOut out = RunBackward(p, &d, policy);
        // The reference library on the same inputs.
        std::vector<uint16_t> ref_dx(p.x.size(), testing::kPoisonBf16);
        const int64_t gbytes = kernels::DTypeBytes(route.grad_dtype);
        std::vector<uint8_t> ref_dw(static_cast<size_t>(C * W * gbytes));
        std::vector<uint8_t> ref_db(static_cast<size_t>(C * gbytes));
        const std::vector<uint8_t> w = ParamBytes(p.w, route.param_dtype);
        const std::vector<uint8_t> b = ParamBytes(p.b, route.param_dtype);
        const std::vector<uint8_t> cu = CuBytes(p.cu, route.cu_dtype);
        Conv1dBwdParams rp;
        rp.x = p.x.data();
        rp.weight = w.data();
        rp.weight_dtype = route.param_dtype;
        rp.bias = route.bias ? b.data() : nullptr;
        rp.bias_dtype = route.param_dtype;
        rp.cu_seqlens = cu.data();
        rp.seqlens_dtype = route.cu_dtype;
        rp.dy = p.dy.data();
        rp.policy = policy;
        rp.dx = ref_dx.data();
        rp.dweight = ref_dw.data();
        rp.dweight_dtype = route.grad_dtype;
        rp.dbias = route.bias ? ref_db.data() : nullptr;
        rp.dbias_dtype = route.grad_dtype;
        rp.S = p.S;
        rp.C = C;
        rp.num_docs = p.docs();
        ASSERT_TRUE(kernels::Conv1dBackwardReference(rp).ok());
        EXPECT_LE(testing::RelL2(testing::Bf16ToDouble(out.dx), testing::Bf16ToDouble(ref_dx)),
                  2e-3);
        for (size_t i = 0; i < ref_dx.size(); ++i) {
          // Both are roundings of values within 2 ulp (+ cancellation) of each other.
          ASSERT_LE(std::fabs(Bf16ToFloat(out.dx[i]) - Bf16ToFloat(ref_dx[i])),
                    3 * Ulp(Bf16ToFloat(ref_dx[i])) + 1e-3)
              << "C=" << C << " dx[" << i / C << ", " << i % C << "]";
        }
        // A sanity bound: with a few channels and ~200 tokens, one rel-L2 sample is noisy
        // (the Shapes suite holds the contract's limits).
        const double grad_limit = route.grad_dtype == DType::kBF16 ? 4e-3 : 1e-3;
        EXPECT_LE(testing::RelL2(GradToDouble(out.dweight, route.grad_dtype),
                                 GradToDouble(ref_dw, route.grad_dtype)),
                  grad_limit)
            << "C=" << C;
        if (route.bias) {
          EXPECT_LE(testing::RelL2(GradToDouble(out.dbias, route.grad_dtype),
                                   GradToDouble(ref_db, route.grad_dtype)),
                    grad_limit)
              << "C=" << C;
        }
      }
      std::vector<uint16_t> ref_y(p.x.size(), testing::kPoisonBf16);
      const std::vector<uint8_t> w = ParamBytes(p.w, route.param_dtype);
      const std::vector<uint8_t> b = ParamBytes(p.b, route.param_dtype);
      Conv1dFwdParams fp;
      fp.x = p.x.data();
      fp.weight = w.data();
      fp.weight_dtype = route.param_dtype;
      fp.bias = route.bias ? b.data() : nullptr;
      fp.bias_dtype = route.param_dtype;
      fp.cu_seqlens = p.cu.data();
      fp.seqlens_dtype = DType::kINT64;
      fp.y = ref_y.data();
      fp.S = p.S;
      fp.C = C;
      fp.num_docs = p.docs();
      ASSERT_TRUE(kernels::Conv1dForwardReference(fp).ok());
      for (size_t i = 0; i < ref_y.size(); ++i) {
        ASSERT_LE(std::fabs(Bf16ToFloat(y[i]) - Bf16ToFloat(ref_y[i])),
                  Ulp(Bf16ToFloat(ref_y[i])) + 1e-6)
            << "C=" << C << " y[" << i / C << ", " << i % C << "]";
      }
    }
    if (C == 7 || C == 72 || C == 256) {
      const Problem p = MakeProblem({40, 0, 33}, C, kF32);
      for (const auto& cu : MalformedOffsets(p.S)) ExpectMalformedFlagged(p, cu, DType::kINT32);
    }
  }
}

// "bf16" at every finite BF16 preactivation: with weight [0, 0, 0, 1] and no bias, pre = x
// exactly, so dx = bf16(SiLU'(x)) (dy = 1) checks SiLU''s table entry for entry, including its
// clamped ends (|p| < 2^-24: 0.5; |p| > 127.5: 1 or 0) and the denormal SiLU' of p near -100,
// on each vector route (C = 8, 6, 1). Then NaN and infinite inputs under both policies: the call
// must succeed and (under memcheck) read nothing outside the table or the tensors.
TEST(Conv1dGpuSanitize, EveryBf16PreactivationAndNonFiniteInputs) {
  CAKEGRAD_REQUIRE_GPU();
  constexpr Route kNoBias{false, DType::kFP32, DType::kFP32, DType::kINT32};
  std::vector<uint16_t> finite;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7f80u) != 0x7f80u) finite.push_back(static_cast<uint16_t>(h));
  }
  for (int64_t C : {8, 6, 1}) {
    ASSERT_EQ(finite.size() % static_cast<size_t>(C), 0u);
    Problem p = MakeProblem({static_cast<int64_t>(finite.size()) / C}, C, kNoBias);
    p.x = finite;
    std::fill(p.dy.begin(), p.dy.end(), FloatToBf16(1.0f));
    for (int64_t c = 0; c < C; ++c) {
      for (int k = 0; k < W; ++k) p.w[c * W + k] = k == W - 1 ? 1.0f : 0.0f;
    }
    DeviceProblem d(p);
    const BwdOut out = RunBackward(p, &d, SiluGradPreactivation::kBF16);
    int64_t bad = 0, exact = 0;
    std::string first_bad;
    for (size_t i = 0; i < finite.size(); ++i) {
      const double want = RoundBf16(SiluGrad(static_cast<double>(Bf16ToFloat(finite[i]))));
      const double got = Bf16ToFloat(out.dx[i]);
      exact += got == want;
      // The table's FP32 entry, rounded again to BF16, can land one ulp from want on a tie.
      if (!(std::fabs(got - want) <= Ulp(want))) {
        if (bad++ == 0) {
          first_bad = "p = " + std::to_string(Bf16ToFloat(finite[i])) + " got " +
                      std::to_string(got) + " want " + std::to_string(want);
        }
      }
    }
    std::printf("  C=%lld: %lld of %zu dx equal bf16(SiLU'(p)), %lld outside 1 ulp\n",
                static_cast<long long>(C), static_cast<long long>(exact), finite.size(),
                static_cast<long long>(bad));
    EXPECT_EQ(bad, 0) << "C=" << C << " first: " << first_bad;
    EXPECT_GE(exact, static_cast<int64_t>(finite.size()) - 64) << "C=" << C;
    // The same inputs under "fp32" must at least run cleanly.
    RunBackward(p, &d, SiluGradPreactivation::kFP32);
  }
  // NaN, infinities and huge values in x, dy and the parameters' reach, under both policies.
  for (int64_t C : {8, 6, 1}) {
    Problem p = MakeProblem({97, 1, 64}, C, kF32);
    const uint16_t specials[] = {0x7fc0, 0xffc0, 0x7f80, 0xff80, 0x7f7f, 0xff7f, 0x0001, 0x8001};
    for (size_t i = 0; i < p.x.size(); i += 5) p.x[i] = specials[(i / 5) % 8];
    for (size_t i = 2; i < p.dy.size(); i += 11) p.dy[i] = specials[(i / 11) % 8];
    DeviceProblem d(p);
    for (SiluGradPreactivation policy :
         {SiluGradPreactivation::kBF16, SiluGradPreactivation::kFP32}) {
      RunBackward(p, &d, policy);
    }
    EXPECT_EQ(d.status.Download()[0], 0u) << "C=" << C;
  }
}

}  // namespace
}  // namespace cakegrad
