// FP64 per-token building blocks of the mHC reference, exposed for the finite-difference tests
// (tests/kernels/mhc_reference_test.cc), which drive them with unrounded FP64 inputs. The public
// *Reference entry points in mhc.h wrap them with the BF16/FP32 tensor layouts.
#pragma once

#include <cstdint>
#include <vector>

namespace cakegrad::kernels::mhc_ref {

// Per-token coefficients of the forward, as stored in stats (FP64 here).
struct TokenCoeffs {
  double m[24];    // r * z_j
  double r;        // 1 / sqrt(sq / (4C) + rms_eps)
  double pre[4];   // sigmoid(l_a) + hc_eps
  double post[4];  // 2 * sigmoid(l_{4+b})
  double R[16];    // Sinkhorn projection, R[4a + b]
};

// Sinkhorn of SPEC.md section 1 on the 4x4 logits L[4a + b].
void SinkhornForward(const double* L, double hc_eps, int iters, double* P);
// Gradient w.r.t. L of sum(dP * P), recomputing the chain from L.
void SinkhornBackward(const double* L, const double* dP, double hc_eps, int iters, double* dL);

// x: [4C] stream-major token; fn: [24, 4C]. Fills *out (and z[24] when z is not null).
void ForwardToken(const double* x, const double* fn, const double* scale, const double* base,
                  int64_t C, double rms_eps, double hc_eps, int iters, TokenCoeffs* out, double* z);

// One token of backward_finish. stats: [64], grad_stats: [32] of that token; x, dy: [4C];
// du: [C]. Writes dx [4C]; adds the token's terms to dfn [24 * 4C], dscale [3], dbase [24].
void BackwardFinishToken(const double* x, const double* dy, const double* du, const double* fn,
                         const double* scale, const double* base, const double* stats,
                         const double* grad_stats, int64_t C, double hc_eps, int iters, double* dx,
                         double* dfn, double* dscale, double* dbase);

}  // namespace cakegrad::kernels::mhc_ref
