#pragma once
// Section V of "The Attention Within" (arXiv 2609.17997): the anisotropy constant c_star
// (Frobenius / spectral / column norm, §V item 1), Assumption V.1's alpha_pd, c_eff (§V item 4)
// and c_eff^proof (erratum E1), beta_i and kappa_i of Prop. V.1.
// Channel and token indices are 0-based in code (paper's mu~ = 1 is channel 0; token i = 1 is
// row 0). Formulas that involve the token number (beta_i, kappa_i, rho_i) take the 1-based i.
#include <vector>

#include "tokdyn/analysis/ssm_bounds.hpp"

namespace tokdyn {

// =============================================================================================
// Section V: anisotropy, effective threshold, Prop V.1

enum class CstarNorm { Frobenius, Spectral, Column };
/// ||S_BC - ((e^mu~)^T S_BC e^mu~) I_n|| (Frobenius, spectral) or the column ||P_perp S_BC e^mu~||.
double anisotropy_numerator(const Mat& S_BC, int mu_tilde, CstarNorm norm);
/// lambda_min((S + S^T)/2) = min over unit z of z^T S z.
double kernel_lambda_min(const Mat& S_BC);
/// The same for S_BC = S_C^T S_B of a layer, from the m x n factors: with W = [S_C^T S_B^T]
/// (n x 2m) = Q R, (S + S^T)/2 = W J W^T (J = [[0, I/2], [I/2, 0]]) has the eigenvalues of the
/// 2m x 2m matrix R J R^T and n - 2m zeros. O(n m^2 + m^3) instead of O(n^3) when 2m < n (the
/// dense route otherwise); equal to kernel_lambda_min(p.S_BC()) up to round-off.
double kernel_lambda_min(const SsmParams& p);

/// c_star = sup_t numerator / inf_{t,z} z^T S_BC(t) z (+inf when the denominator is <= 0: V.1
/// fails); alpha_pd = inf_{t,z} z^T S_BC z (Assumption V.1); c_eff and c_eff^proof (E1).
struct AnisotropyConstants {
  double numerator = 0;
  double alpha_pd = 0;
  double c_star = 0;
  double c_eff = 0;
  double c_eff_proof = 0;
};
AnisotropyConstants anisotropy(const std::vector<SsmParams>& samples, const SpectralConstants& k,
                               CstarNorm norm = CstarNorm::Frobenius);

/// Effective threshold (§V item 4): c_star lambda_max / sqrt((gamma + (l-1) lambda_min)^2 + c_star^2 lambda_max^2 (l-1)^2).
double c_eff_paper(double c_star, double lambda_max, double lambda_min, double gamma, int len);
/// Erratum E1: c_eff^proof = (l - 1) c_eff, the threshold Prop V.1's beta_l > 0 really needs.
double c_eff_proof(double c_star, double lambda_max, double lambda_min, double gamma, int len);
/// Prop V.1: beta_i = c (gamma + (i-1) lambda_min) - c_star lambda_max (i-1) sqrt(1 - c^2) (1-based i).
double prop_v1_beta(double c, double c_star, double gamma, double lambda_min, double lambda_max, int i);
/// Prop V.1: kappa_i = alpha_pd beta_i (1 + c).
double prop_v1_kappa(double alpha_pd, double beta, double c);

}  // namespace tokdyn
