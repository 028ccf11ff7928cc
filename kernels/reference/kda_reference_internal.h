// FP64 core of the KDA reference, exposed for the finite-difference tests
// (tests/kernels/kda_reference_test.cc), which drive it with unrounded FP64 inputs. The public
// *Reference entry points in kda.h wrap it with the BF16/FP32 tensor layouts.
#pragma once

#include <cstdint>
#include <vector>

namespace cakegrad::kernels::kda_ref {

// Every tensor is the contiguous FP64 image of the one SPEC.md section 3 names; tokens are the
// flattened [total_tokens] axis (B*T), documents are [cu[n], cu[n+1]).
struct Problem {
  int64_t total_tokens = 0;
  int64_t H = 0;
  std::vector<int64_t> cu;         // [N + 1], already validated
  std::vector<double> q, k, v, g;  // [total_tokens, H, 128]
  std::vector<double> beta;        // [total_tokens, H]
  std::vector<double> A_log;       // [H]
  std::vector<double> dt_bias;     // [H, 128]
  std::vector<double> s0;          // [N, H, 128, 128], or empty for zeros
  double scale = 0.0;
  double lower_bound = 0.0;
};

struct Grads {
  std::vector<double> dq, dk, dv, dg, dbeta, dA_log, ddt_bias, ds0;
  // [H]: the sum of |term| over dA_log's terms (one a token and key channel). dA_log cancels
  // strongly, so the tests print an FP32 form's error against this as well as against |dA_log|.
  std::vector<double> dA_log_terms;
};

// o: [total_tokens, H, 128]; final_state: [N, H, 128, 128]. Resizes both.
void Forward(const Problem& p, std::vector<double>* o, std::vector<double>* final_state);

// Gradients of sum(d_o * o) + sum(dfinal * final_state); dfinal may be empty (zeros).
// Resizes every member of *grads.
void Backward(const Problem& p, const std::vector<double>& d_o, const std::vector<double>& dfinal,
              Grads* grads);

}  // namespace cakegrad::kernels::kda_ref
