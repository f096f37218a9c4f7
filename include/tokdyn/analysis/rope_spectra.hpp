#pragma once
// Consensus kernels of RoPE self-attention and their spectra (RoPE paper §4–§5, §7: eqs. (13)-(14),
// (21), Thms 5.1–5.3, eqs. (38)-(39), Thm 7.3, Props. 7.4-7.5).
//
//  * Scaled modified Bessel functions I~_k(beta) = e^{-beta} I_k(beta) (Miller's algorithm in
//    ratio form, normalised by I~_0 + 2 sum_{k>=1} I~_k = 1; see bessel_i_scaled).
//  * The consensus kernel (14) for arbitrary positions / frequencies / plane energies, its
//    spectrum by three independent symmetric formulations (T7.3), and the PSD facts of T5.2.
//  * The resonant single-frequency ring (21): the congruence-filtered Bessel-aliasing spectrum
//    (22) with the exact gcd reachability mask, the DFT of the first row, a dense eigensolve,
//    the cancellation-free L-grid gap (B-3) and the large-beta asymptotics (26)–(27).
//  * The analytic cases (45)–(46) and (47), and the evaluations of configuration grids (App. D.2,
//    D.5) that report the Table 2 discrepancies (the grids: experiments/rope_spectra_configs.hpp).
//
// Invalid user input raises std::invalid_argument with a one-line message naming the input (the parameter layer reports it as std::invalid_argument, exit 2).
#include <cstdint>
#include <vector>

#include "tokdyn/core/tokens.hpp"

namespace tokdyn::rope {

// ---------------------------------------------------------------------------------------------
// Scaled modified Bessel functions of the first kind.

/// I~_k(beta) = e^{-beta} I_k(beta) for integer k (I_{-k} = I_k) and finite beta >= 0.
/// Method: the ratios r_k = I_k / I_{k-1} obey r_k = 1 / (2k/beta + r_{k+1}) (the three-term
/// recurrence I_{k-1} = (2k/beta) I_k + I_{k+1} in ratio form); they are run backwards from
/// r_{N+1} = 0 (Miller), with N chosen so that I_N / I_max(k, kmax) and I_N / I_0 are below
/// e^{-45}/e^{-50} by the uniform estimate log(I_0/I_k) ~ k asinh(k/beta) - sqrt(beta^2+k^2) + beta.
/// The normalisation is the exact identity I~_0 + 2 sum_{k>=1} I~_k = 1 (e^beta = sum_{k in Z}
/// I_k(beta)), accumulated by Horner's rule on the ratios. Everything runs in long double (x87
/// extended on x86-64), so neither overflow nor rescaling can occur and the relative error is
/// ~1e-16 up to beta = 1e4 and beyond. Orders past the rigorous underflow bound
/// I~_k <= e^{-beta} (beta/2)^k / k! e^{beta^2/(4(k+1))} return exactly 0 without work.
/// beta = 0: I~_0 = 1, I~_k = 0 (k != 0). std::invalid_argument for beta < 0, non-finite or above
/// kMaxBesselBeta (the Miller start N ~ 10 sqrt(beta) would exceed 1e7 steps).
inline constexpr double kMaxBesselBeta = 1e12;
double bessel_i_scaled(int k, double beta);
/// I~_k(beta) for k = 0..kmax (kmax >= 0).
std::vector<double> bessel_i_scaled_all(int kmax, double beta);

// ---------------------------------------------------------------------------------------------
// Consensus kernel (14) and its spectrum.

/// K_ij = sum_l a_l cos(omega_l (p_i - p_j)); W = exp(beta (K - 1)) (globally scaled, entries in
/// [e^{-2 beta}, 1]; computed as exp(-beta sum_l a_l 2 sin^2(omega_l (p_i - p_j) / 2)), which is
/// the same number without cancellation); Z = W 1; A = D^{-1} W; S = D^{-1/2} W D^{-1/2}.
/// K, W and S are exactly symmetric (upper triangle mirrored).
struct ConsensusKernel {
  Mat K, W, A, S;
  Vec Z;
};

/// std::invalid_argument unless: >= 2 positions, >= 1 frequency, as many energies as frequencies, all
/// finite, energies >= 0 summing to 1 within 1e-12, beta finite and >= 0.
ConsensusKernel consensus_kernel(const std::vector<double>& positions, const std::vector<double>& freqs,
                                 const std::vector<double>& energies, double beta);

/// Three independent symmetric formulations of the spectrum of A (Thm 7.3):
///  Similarity: eigenvalues of S; Laplacian: second-smallest eigenvalue of I - S (diagonal
///  (Z_i - W_ii)/Z_i, cancellation-free); Generalized: W v = lambda D v (Cholesky-reduced).
enum class GapMethod { Similarity, Laplacian, Generalized };

/// Eigenvalues of A descending (for Laplacian: 1 - mu, mu ascending); gap = 1 - lambda_2
/// (for Laplacian: mu_2 directly).
struct KernelSpectrum {
  Vec eigenvalues;
  double gap = 0.0;
};
KernelSpectrum consensus_spectrum(const ConsensusKernel& k, GapMethod m = GapMethod::Similarity);

/// Smallest eigenvalues of the (scaled) W and of S: the PSD witnesses of T5.2 / T7.3.
struct PsdMinima {
  double lambda_min_W = 0.0, lambda_min_S = 0.0;
};
PsdMinima psd_minima(const ConsensusKernel& k);

/// n a_{beta,n} with a_{beta,n} = e^{-2 beta} / (n - 1 + e^{-2 beta}) (7): the lower bound (38) on
/// the local gap.
double local_gap_lower_bound(int n, double beta);

// ---------------------------------------------------------------------------------------------
// Resonant single-frequency ring (21): d = 2, p_j = j (j = 0..n-1), omega = 2 pi m / n.

/// g = gcd(m mod n, n) with gcd(0, n) = n (m may be negative); L = n / g.
int ring_gcd(int n, int m);
int ring_period(int n, int m);

struct RingMode {
  int q = 0;
  double lambda = 0.0;
  bool reachable = false;  ///< g | q, from integer congruences only
};

/// (22): lambda_q = B_q / B_0, B_q = sum_{k in Z, m k = q (mod n)} I~_|k|(beta), truncated at |k| <= K
/// with K >= n and I~_K / I~_0 < e^{-50}; terms are added smallest first. Modes q = 0..n-1 in
/// order. Unreachable modes are exactly 0 by construction (no term lands there); reachable
/// modes are analytically positive for beta > 0 but may underflow to 0 (e.g. huge n, tiny beta).
/// std::invalid_argument for n < 2, beta < 0 or non-finite.
std::vector<RingMode> ring_spectrum_bessel(int n, int m, double beta);
/// lambda_q = sum_h a_h cos(2 pi q h / n) with a_h = w_h / sum w, w_h = exp(-2 beta sin^2(pi (m h mod n) / n));
/// all phases reduced with integer arithmetic first. Index q = 0..n-1.
std::vector<double> ring_spectrum_dft(int n, int m, double beta);
/// Dense symmetric eigensolve of the literal n x n A (each row normalised by its own sum; entries
/// from integer-reduced phases (m (j - i) mod n)), via S = D^{-1/2} W D^{-1/2}; sorted descending.
std::vector<double> ring_spectrum_direct(int n, int m, double beta);
/// 1 - max_{q != 0} lambda_q from the Bessel spectrum (1 when all modes q != 0 vanish).
double ring_gap(int n, int m, double beta);

/// (B-3): gamma_L = min_{s=1..L-1} sum_k b_k 2 sin^2(pi s k / L) / sum_k b_k, b_k = exp(-2 beta sin^2(pi k / L));
/// cancellation-free (every term >= 0). L = 1: 1.
double lgrid_gap(int L, double beta);
/// L = 1: 1; L = 2: 2 e^{-2 beta} / (1 + e^{-2 beta}) (26, exact); L >= 3: 2 Delta_L e^{-beta Delta_L} (27).
double gap_asymptotic(int L, double beta);
/// gamma_L(beta) / (2 Delta_L e^{-beta Delta_L}) for L >= 2, computed with
/// b^_k = exp(-beta (Delta_k - Delta_L)) so no 0 * inf arises; -> 1 (L >= 3), -> 1/2 (L = 2).
double asymptotic_ratio(int L, double beta);
/// 1 - I_1(beta)/I_0(beta) from scaled Bessel functions. Reference curve only (not a theorem).
double continuum_gap(double beta);

// ---------------------------------------------------------------------------------------------
// Analytic cases.

/// Prop. 7.4 (45)/(46): n = 3, p = (0,1,2), beta = (3/4) ln 2, (omega_1, omega_2) = (pi/2, pi),
/// a = energy in the pi/2 plane (a in [0, 1], else std::invalid_argument). x = e^{beta (a - 2)}, y = e^{-2 beta a};
/// lambda_- = (1 - y)/(1 + x + y), lambda_+ = (1 + y)/(1 + x + y) + 1/(1 + 2x) - 1, gap = min(1 - lambda_-, 1 - lambda_+).
struct Prop74Spectrum {
  double lambda_minus = 0.0, lambda_plus = 0.0, gap = 0.0;
};
Prop74Spectrum prop74_spectrum(double a);
double prop74_gap(double a);
double prop74_beta();  ///< (3/4) ln 2

/// (47): two tokens at positions (0, delta), one active frequency omega: 2q/(1+q),
/// q = exp(beta (cos(omega delta) - 1)) (computed as exp(-2 beta sin^2(omega delta / 2))).
double two_token_gap(double beta, double omega, double delta);

// ---------------------------------------------------------------------------------------------
// Evaluations of configurations (App. D.2, D.5; the paper's grids: experiments/rope_spectra_configs.hpp).

struct RingConfig {
  int n = 0, m = 0;
  double beta = 0.0;
};

struct ResonantRow {
  RingConfig cfg;
  int g = 0, L = 0;
  int reachable = 0;          ///< modes with g | q (mask count) = L
  int structural_zeros = 0;   ///< n - L
  int positive = 0;           ///< reachable modes with lambda > 0 (floating point; diagnostic only)
  double spectrum_error = 0;  ///< max |sorted direct - sorted Bessel|
  double dft_error = 0;       ///< max_q |Bessel_q - DFT_q|
  double gap_bessel = 0, gap_lgrid = 0;
  double gap_error = 0;       ///< |ring_gap - lgrid_gap| (Bessel–Fourier gap error)
};
ResonantRow evaluate_resonant(const RingConfig& c);
struct ResonantSummary {
  int count = 0;
  double max_spectrum_error = 0, max_dft_error = 0, max_gap_error = 0;
  bool counts_ok = true;  ///< every row: reachable == L and structural_zeros == n - L
  std::vector<ResonantRow> rows;
};
ResonantSummary evaluate_resonant_grid(const std::vector<RingConfig>& cfgs);


/// Two-plane multi-frequency configuration on positions 0..n-1; energies[0] belongs to freqs[0].
struct MultiFreqConfig {
  int n = 0;
  double beta = 0.0;
  std::vector<double> freqs, energies;
};

struct ThreeWayRow {
  MultiFreqConfig cfg;
  double gap_similarity = 0, gap_laplacian = 0, gap_generalized = 0;
  double disagreement = 0;  ///< max pairwise |difference| of the three gaps
};
ThreeWayRow evaluate_three_way(const MultiFreqConfig& c);
struct ThreeWaySummary {
  int count = 0;
  double max_disagreement = 0;
  std::vector<ThreeWayRow> rows;
};
ThreeWaySummary evaluate_three_way_grid(const std::vector<MultiFreqConfig>& cfgs);

struct PsdRow {
  MultiFreqConfig cfg;
  double lambda_min_W = 0, lambda_min_S = 0;
  double lambda_max_S = 0;  ///< should be 1
  double gap = 0;
};
PsdRow evaluate_psd(const MultiFreqConfig& c);
struct PsdSummary {
  int count = 0;
  double min_lambda_W = 0, min_lambda_S = 0;  ///< minima over the rows
  double max_lambda_S_error = 0;              ///< max |lambda_max(S) - 1|
  std::vector<PsdRow> rows;
};
PsdSummary evaluate_psd_grid(const std::vector<MultiFreqConfig>& cfgs);

}  // namespace tokdyn::rope
