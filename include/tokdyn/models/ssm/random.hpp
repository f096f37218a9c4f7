#pragma once
// Random zero-mean weights for the paper's SSM model, drawn afresh for a layer (Fig. 3, §VI).
#include <string>

#include "tokdyn/models/ssm/ssm.hpp"

namespace tokdyn {

/// How a random layer is drawn (every matrix zero-mean, as Lemma IV.1 needs).
///  "mamba2": Mamba-2's own initialisation at the scale of its normalised inputs. The real block
///    applies in_proj (init U(-1/sqrt(d), 1/sqrt(d))) to RMSNorm(x), a vector of norm sqrt(d);
///    on unit tokens the same products are (sqrt(d) W) z, so S_B, S_C and every W_Delta^mu have
///    iid U(-1, 1) entries. b_Delta is Mamba-2's dt_bias init (dt = exp(U(ln 1e-3, ln 1e-1)),
///    floored at 1e-4, b = dt + ln(-expm1(-dt)), the inverse softplus), alpha = exp(A_log) with
///    A_log = ln U(1, 16).
///  "gaussian": S_B, S_C, W_Delta iid N(0, sigma^2), b_Delta and alpha as above.
struct SsmRandomSpec {
  int n = 768;
  int m = 128;
  std::string weights = "mamba2";
  double sigma = 1.0;
};

SsmParams draw_ssm_layer(const SsmRandomSpec& spec, Rng& rng);

}  // namespace tokdyn
