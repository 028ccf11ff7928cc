// FP64 reference of the causal depthwise conv1d (width 4) + SiLU family: the test oracle and the
// daemon's host backend. Everything is evaluated in double from the BF16/FP32 inputs and rounded
// once at the end, as SPEC.md section 2 defines "exact".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cakegrad/kernels/conv1d.h"

namespace cakegrad::kernels {
namespace {

double LoadParam(const void* p, DType dtype, int64_t i) {
  if (dtype == DType::kBF16) return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

void StoreParam(void* p, DType dtype, int64_t i, double v) {
  if (dtype == DType::kBF16) {
    static_cast<uint16_t*>(p)[i] = DoubleToBf16(v);
  } else {
    static_cast<float*>(p)[i] = static_cast<float>(v);
  }
}

bool IsParamDType(DType d) { return d == DType::kFP32 || d == DType::kBF16; }

Status CheckParamDType(const char* name, DType d) {
  if (IsParamDType(d)) return OkStatus();
  return InvalidArgument(std::string("conv1d: ") + name + " must be float32 or bfloat16, got " +
                         DTypeName(d));
}

// Reads and checks cu_seqlens (host memory) into int64 offsets. Nothing is written to any output
// before this succeeds, so a malformed call leaves the caller's buffers untouched.
Status ReadCuSeqlens(const void* cu, DType dtype, int64_t num_docs, int64_t S,
                     std::vector<int64_t>* out) {
  if (dtype != DType::kINT32 && dtype != DType::kINT64) {
    return InvalidArgument(std::string("conv1d: cu_seqlens must be int32 or int64, got ") +
                           DTypeName(dtype));
  }
  if (num_docs < 0) return InvalidArgument("conv1d: num_docs must be >= 0");
  if (cu == nullptr) return InvalidArgument("conv1d: cu_seqlens is null");
  out->resize(static_cast<size_t>(num_docs) + 1);
  for (int64_t i = 0; i <= num_docs; ++i) {
    (*out)[i] = dtype == DType::kINT32 ? static_cast<const int32_t*>(cu)[i]
                                       : static_cast<const int64_t*>(cu)[i];
  }
  if ((*out)[0] != 0) {
    return InvalidArgument("conv1d: cu_seqlens[0] must be 0, got " + std::to_string((*out)[0]));
  }
  for (int64_t i = 0; i < num_docs; ++i) {
    if ((*out)[i + 1] < (*out)[i]) {
      return InvalidArgument("conv1d: cu_seqlens must be non-decreasing, but cu_seqlens[" +
                             std::to_string(i + 1) + "] = " + std::to_string((*out)[i + 1]) +
                             " < cu_seqlens[" + std::to_string(i) +
                             "] = " + std::to_string((*out)[i]));
    }
  }
  if ((*out)[num_docs] != S) {
    return InvalidArgument("conv1d: cu_seqlens[" + std::to_string(num_docs) +
                           "] = " + std::to_string((*out)[num_docs]) +
                           " must equal S = " + std::to_string(S));
  }
  return OkStatus();
}

Status CheckCommon(int64_t S, int64_t C, const void* x, const void* weight, DType weight_dtype,
                   const void* bias, DType bias_dtype) {
  if (S < 0) return InvalidArgument("conv1d: S must be >= 0, got " + std::to_string(S));
  if (C < 1) return InvalidArgument("conv1d: C must be >= 1, got " + std::to_string(C));
  if (S > 0 && x == nullptr) return InvalidArgument("conv1d: x is null");
  if (weight == nullptr) return InvalidArgument("conv1d: weight is null");
  Status s = CheckParamDType("weight", weight_dtype);
  if (!s.ok()) return s;
  if (bias != nullptr) return CheckParamDType("bias", bias_dtype);
  return OkStatus();
}

// Weight [C, 4] and bias [C] widened to double once, so the loops below read one layout.
struct Params64 {
  std::vector<double> w;
  std::vector<double> b;
};

Params64 WidenParams(int64_t C, const void* weight, DType weight_dtype, const void* bias,
                     DType bias_dtype) {
  Params64 p;
  p.w.resize(static_cast<size_t>(C) * kConv1dWidth);
  for (int64_t i = 0; i < C * kConv1dWidth; ++i) p.w[i] = LoadParam(weight, weight_dtype, i);
  p.b.assign(static_cast<size_t>(C), 0.0);
  if (bias != nullptr) {
    for (int64_t c = 0; c < C; ++c) p.b[c] = LoadParam(bias, bias_dtype, c);
  }
  return p;
}

double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// pre[t, c] for one row t of a document starting at `start`, written to `pre` (length C).
void Preactivation(const uint16_t* x, const Params64& p, int64_t C, int64_t start, int64_t t,
                   double* pre) {
  for (int64_t c = 0; c < C; ++c) pre[c] = p.b[c];
  for (int k = 0; k < kConv1dWidth; ++k) {
    const int64_t src = t - (kConv1dWidth - 1) + k;
    if (src < start) continue;
    const uint16_t* xr = x + src * C;
    for (int64_t c = 0; c < C; ++c) pre[c] += p.w[c * kConv1dWidth + k] * Bf16ToFloat(xr[c]);
  }
}

}  // namespace

Status Conv1dForwardReference(const Conv1dFwdParams& p) {
  Status s = CheckCommon(p.S, p.C, p.x, p.weight, p.weight_dtype, p.bias, p.bias_dtype);
  if (!s.ok()) return s;
  if (p.S > 0 && p.y == nullptr) return InvalidArgument("conv1d: y is null");
  std::vector<int64_t> cu;
  s = ReadCuSeqlens(p.cu_seqlens, p.seqlens_dtype, p.num_docs, p.S, &cu);
  if (!s.ok()) return s;

  const int64_t C = p.C;
  const Params64 prm = WidenParams(C, p.weight, p.weight_dtype, p.bias, p.bias_dtype);
  std::vector<double> pre(static_cast<size_t>(C));
  for (int64_t d = 0; d < p.num_docs; ++d) {
    for (int64_t t = cu[d]; t < cu[d + 1]; ++t) {
      Preactivation(p.x, prm, C, cu[d], t, pre.data());
      uint16_t* yr = p.y + t * C;
      for (int64_t c = 0; c < C; ++c) yr[c] = DoubleToBf16(pre[c] * Sigmoid(pre[c]));
    }
  }
  return OkStatus();
}

Status Conv1dBackwardReference(const Conv1dBwdParams& p) {
  Status s = CheckCommon(p.S, p.C, p.x, p.weight, p.weight_dtype, p.bias, p.bias_dtype);
  if (!s.ok()) return s;
  if (p.policy != SiluGradPreactivation::kBF16 && p.policy != SiluGradPreactivation::kFP32) {
    return InvalidArgument("conv1d: silu_grad_preactivation must be \"bf16\" or \"fp32\"");
  }
  if (p.S > 0 && (p.dy == nullptr || p.dx == nullptr)) {
    return InvalidArgument("conv1d: dy and dx must be non-null when S > 0");
  }
  if (p.dweight == nullptr) return InvalidArgument("conv1d: dweight is null");
  s = CheckParamDType("dweight", p.dweight_dtype);
  if (!s.ok()) return s;
  if ((p.bias != nullptr) != (p.dbias != nullptr)) {
    return InvalidArgument(p.bias != nullptr ? "conv1d: bias is given, so dbias is required"
                                             : "conv1d: dbias needs bias");
  }
  if (p.dbias != nullptr) {
    s = CheckParamDType("dbias", p.dbias_dtype);
    if (!s.ok()) return s;
  }
  std::vector<int64_t> cu;
  s = ReadCuSeqlens(p.cu_seqlens, p.seqlens_dtype, p.num_docs, p.S, &cu);
  if (!s.ok()) return s;

  const int64_t C = p.C;
  constexpr int W = kConv1dWidth;
  const Params64 prm = WidenParams(C, p.weight, p.weight_dtype, p.bias, p.bias_dtype);
  const bool round_pre = p.policy == SiluGradPreactivation::kBF16;
  std::vector<double> dw(static_cast<size_t>(C) * W, 0.0);
  std::vector<double> db(static_cast<size_t>(C), 0.0);
  std::vector<double> pre(static_cast<size_t>(C));
  std::vector<double> acc(static_cast<size_t>(C));
  // dpre of the last W rows, ring-indexed by token: dx[t] needs dpre[t .. t + 3], so each document
  // is walked backwards and the ring always holds the rows after t.
  std::vector<double> ring(static_cast<size_t>(W) * C);
  auto dpre_row = [&](int64_t t) { return ring.data() + (t & (W - 1)) * C; };

  for (int64_t d = 0; d < p.num_docs; ++d) {
    const int64_t start = cu[d], end = cu[d + 1];
    for (int64_t t = end - 1; t >= start; --t) {
      Preactivation(p.x, prm, C, start, t, pre.data());
      double* dp = dpre_row(t);
      const uint16_t* dyr = p.dy + t * C;
      for (int64_t c = 0; c < C; ++c) {
        const double v = round_pre ? Bf16ToFloat(DoubleToBf16(pre[c])) : pre[c];
        const double sg = Sigmoid(v);
        dp[c] = Bf16ToFloat(dyr[c]) * sg * (1.0 + v * (1.0 - sg));
      }
      // dx[t] = sum_k w[c, k] * dpre[t + 3 - k], terms past the document's end dropped.
      const int64_t ahead = std::min<int64_t>(W - 1, end - 1 - t);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= ahead; ++j) {
        const double* dpj = dpre_row(t + j);
        for (int64_t c = 0; c < C; ++c) acc[c] += prm.w[c * W + (W - 1 - j)] * dpj[c];
      }
      uint16_t* dxr = p.dx + t * C;
      for (int64_t c = 0; c < C; ++c) dxr[c] = DoubleToBf16(acc[c]);
      // dweight[c, k] += dpre[t] * x[t - 3 + k], terms before the document's start dropped.
      for (int k = 0; k < W; ++k) {
        const int64_t src = t - (W - 1) + k;
        if (src < start) continue;
        const uint16_t* xr = p.x + src * C;
        for (int64_t c = 0; c < C; ++c) dw[c * W + k] += dp[c] * Bf16ToFloat(xr[c]);
      }
      for (int64_t c = 0; c < C; ++c) db[c] += dp[c];
    }
  }
  for (int64_t i = 0; i < C * W; ++i) StoreParam(p.dweight, p.dweight_dtype, i, dw[i]);
  if (p.dbias != nullptr) {
    for (int64_t c = 0; c < C; ++c) StoreParam(p.dbias, p.dbias_dtype, c, db[c]);
  }
  return OkStatus();
}

}  // namespace cakegrad::kernels
