#include "tokdyn/analysis/ssm_bounds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "tokdyn/core/nn.hpp"
#include "tokdyn/analysis/ssm_section5.hpp"
#include "tokdyn/core/parallel.hpp"
#include "tokdyn/core/rng.hpp"
#include "ssm_internal.hpp"

namespace tokdyn {

// =============================================================================================
// Sampling

std::vector<SsmParams> sample_times(const WeightSchedule<SsmParams>& s, const std::vector<double>& times) {
  std::vector<SsmParams> out;
  out.reserve(times.size());
  for (double t : times) out.push_back(*s.at_time(t));
  return out;
}

std::vector<SsmParams> sample_layers(const WeightSchedule<SsmParams>& s, long depth) {
  std::vector<SsmParams> out;
  out.reserve(static_cast<std::size_t>(std::max(0L, depth)));
  for (long k = 1; k <= depth; ++k) out.push_back(*s.at_layer(k));
  return out;
}

std::vector<double> time_grid(double t0, double t1, int count) {
  if (count < 2) throw std::invalid_argument("time_grid: count must be >= 2");
  std::vector<double> t(static_cast<std::size_t>(count));
  for (int k = 0; k < count; ++k) t[static_cast<std::size_t>(k)] = t0 + (t1 - t0) * k / (count - 1);
  return t;
}

// =============================================================================================
// Lemma III.1: channel bounds

ChannelBounds channel_bounds(const SsmParams& p, int len) {
  if (len < 1) throw std::invalid_argument("channel_bounds: len must be >= 1");
  const int n = p.n();
  ChannelBounds cb;
  cb.len = len;
  cb.delta_lo.resize(n);
  cb.delta_hi.resize(n);
  cb.lambda_lo.resize(n, len);
  cb.lambda_hi.resize(n, len);
  for (int mu = 0; mu < n; ++mu) {
    // |W^mu z| <= ||W^mu|| on the unit sphere, softplus increasing (Lemma III.1).
    const double w = p.W_delta.row(mu).norm();
    const double lo = nn::softplus(p.b_delta[mu] - w), hi = nn::softplus(p.b_delta[mu] + w);
    cb.delta_lo[mu] = lo;
    cb.delta_hi[mu] = hi;
    const double a = p.alpha[mu];
    for (int s = 0; s < len; ++s) {
      // lambda_ij^mu = Delta_j exp(-alpha sum_{l=j+1}^{i} Delta_l) (Lemma II.1), tokens independent.
      if (a >= 0.0) {
        cb.lambda_lo(mu, s) = lo * std::exp(-a * s * hi);
        cb.lambda_hi(mu, s) = hi * std::exp(-a * s * lo);
      } else {
        cb.lambda_lo(mu, s) = lo * std::exp(-a * s * lo);
        cb.lambda_hi(mu, s) = hi * std::exp(-a * s * hi);
      }
    }
  }
  return cb;
}

namespace {

/// Certified gap of channel mu: min_s [lambda_lo^mu(s) - max_{nu != mu} lambda_hi^nu(s)] (III.1.2).
double certified_gap(const ChannelBounds& cb, int mu) {
  const Eigen::Index n = cb.lambda_lo.rows();
  double gap = kInf;
  for (int s = 0; s < cb.len; ++s) {
    double other = -kInf;
    for (Eigen::Index nu = 0; nu < n; ++nu)
      if (nu != mu) other = std::max(other, cb.lambda_hi(nu, s));
    gap = std::min(gap, cb.lambda_lo(mu, s) - other);
  }
  return gap;
}

SpectralConstants constants_from_bounds(const ChannelBounds& cb, int mu) {
  const Eigen::Index n = cb.lambda_lo.rows();
  SpectralConstants k;
  k.len = cb.len;
  k.mu_tilde = mu;
  k.gamma = certified_gap(cb, mu);  // gamma = min_{j<=i} gamma_ij (III.1.2)
  double Gamma = -kInf;
  for (int s = 0; s < cb.len; ++s) {
    double other = kInf;
    for (Eigen::Index nu = 0; nu < n; ++nu)
      if (nu != mu) other = std::min(other, cb.lambda_lo(nu, s));
    if (n > 1) Gamma = std::max(Gamma, cb.lambda_hi(mu, s) - other);  // Gamma_ij (§IV)
  }
  k.Gamma = n > 1 ? Gamma : 0.0;
  k.Lambda = 0.0;  // Lambda = max_i sup sum_{j<i} lambda_ij^mu~ <= sum_{s=1}^{l-1} lambda_hi(s) (§IV)
  for (int s = 1; s < cb.len; ++s) k.Lambda += cb.lambda_hi(mu, s);
  k.lambda_max = cb.lambda_hi.row(mu).maxCoeff();  // §V item 2
  k.lambda_min = cb.lambda_lo.row(mu).minCoeff();  // §V item 3
  k.D_norm_max = cb.lambda_hi.maxCoeff();          // Lemma III.1: sup ||D_ij||_2
  k.principal = k.gamma > 0.0;
  return k;
}

}  // namespace

std::pair<int, double> principal_channel(const ChannelBounds& cb) {
  // The largest and second-largest lambda_hi(., s) per gap s make every channel's certified
  // gap O(len) instead of O(n len): max over nu != mu is top1 unless mu attains it.
  const Eigen::Index n = cb.lambda_lo.rows();
  std::vector<double> top1(static_cast<std::size_t>(cb.len), -kInf), top2 = top1;
  std::vector<Eigen::Index> arg1(static_cast<std::size_t>(cb.len), -1);
  for (int s = 0; s < cb.len; ++s)
    for (Eigen::Index nu = 0; nu < n; ++nu) {
      const double v = cb.lambda_hi(nu, s);
      const auto si = static_cast<std::size_t>(s);
      if (v > top1[si]) {
        top2[si] = top1[si];
        top1[si] = v;
        arg1[si] = nu;
      } else if (v > top2[si]) {
        top2[si] = v;
      }
    }
  int best = 0;
  double gbest = -kInf;
  for (int mu = 0; mu < n; ++mu) {
    double g = kInf;
    for (int s = 0; s < cb.len; ++s) {
      const auto si = static_cast<std::size_t>(s);
      g = std::min(g, cb.lambda_lo(mu, s) - (arg1[si] == mu ? top2[si] : top1[si]));
    }
    if (g > gbest) {
      gbest = g;
      best = mu;
    }
  }
  return {best, gbest};
}

SpectralConstants spectral_constants(const SsmParams& p, int len, int mu_tilde) {
  const ChannelBounds cb = channel_bounds(p, len);
  if (mu_tilde < 0) mu_tilde = principal_channel(cb).first;
  check_mu(mu_tilde, p.n(), "spectral_constants");
  return constants_from_bounds(cb, mu_tilde);
}

SpectralConstants spectral_constants(const std::vector<SsmParams>& samples, int len, int mu_tilde) {
  if (samples.empty()) throw std::invalid_argument("spectral_constants: no samples");
  if (mu_tilde < 0) mu_tilde = principal_channel(channel_bounds(samples.front(), len)).first;
  SpectralConstants k = spectral_constants(samples.front(), len, mu_tilde);
  for (std::size_t a = 1; a < samples.size(); ++a) {
    const SpectralConstants q = spectral_constants(samples[a], len, mu_tilde);
    // inf/sup over t (Lemma III.1): per-time bounds combined.
    k.gamma = std::min(k.gamma, q.gamma);
    k.Gamma = std::max(k.Gamma, q.Gamma);
    k.Lambda = std::max(k.Lambda, q.Lambda);
    k.lambda_max = std::max(k.lambda_max, q.lambda_max);
    k.lambda_min = std::min(k.lambda_min, q.lambda_min);
    k.D_norm_max = std::max(k.D_norm_max, q.D_norm_max);
  }
  k.principal = k.gamma > 0.0;
  return k;
}

bool ParameterBounds::hold() const {
  return std::isfinite(alpha_max) && std::isfinite(W_max) && std::isfinite(b_max) && std::isfinite(S_BC_max) && b_min > 0.0;
}

ParameterBounds parameter_bounds(const std::vector<SsmParams>& samples) {
  if (samples.empty()) throw std::invalid_argument("parameter_bounds: no samples");
  ParameterBounds b;
  b.b_min = kInf;
  for (const auto& p : samples) {
    b.alpha_max = std::max(b.alpha_max, p.alpha.cwiseAbs().maxCoeff());                // III.1.3
    for (Eigen::Index mu = 0; mu < p.W_delta.rows(); ++mu) b.W_max = std::max(b.W_max, p.W_delta.row(mu).norm());  // III.1.4
    b.b_max = std::max(b.b_max, p.b_delta.cwiseAbs().maxCoeff());                      // III.1.5
    b.b_min = std::min(b.b_min, p.b_delta.cwiseAbs().minCoeff());                      // III.1.6
    b.S_BC_max = std::max(b.S_BC_max, p.S_BC().norm());                                // III.1.7
  }
  return b;
}

std::vector<std::vector<Vec>> io_lambdas(const SsmParams& p, const Tokens& Z) {
  const int len = static_cast<int>(Z.rows()), n = p.n();
  Mat Delta = Z * p.W_delta.transpose();
  Delta.rowwise() += p.b_delta.transpose();
  Delta = Delta.unaryExpr([](double x) { return nn::softplus(x); });
  std::vector<std::vector<Vec>> L(static_cast<std::size_t>(len));
  for (int i = 0; i < len; ++i) L[static_cast<std::size_t>(i)].resize(static_cast<std::size_t>(i + 1));
  for (int j = 0; j < len; ++j) {
    // lambda_ij^mu = Delta_j^mu exp(d_ij^mu), d_ij^mu = -alpha^mu sum_{l=j+1}^{i} Delta_l^mu (Lemma II.1),
    // by running products (graceful underflow).
    Vec v = Delta.row(j).transpose();
    for (int i = j; i < len; ++i) {
      if (i > j)
        for (int mu = 0; mu < n; ++mu) v[mu] *= std::exp(-p.alpha[mu] * Delta(i, mu));
      L[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = v;
    }
  }
  return L;
}

SampledSpectrum sampled_spectrum(const SsmParams& p, int len, int mu_tilde, int samples, std::uint64_t seed) {
  const int n = p.n();
  check_mu(mu_tilde, n, "sampled_spectrum");
  SampledSpectrum r;
  r.gamma = kInf;
  r.Gamma = -kInf;
  r.lambda_max = -kInf;
  r.lambda_min = kInf;
  Rng rng(seed, {0x5a});
  for (int a = 0; a < samples; ++a) {
    const Tokens Z = rng.sphere_tokens(len, n);
    const auto L = io_lambdas(p, Z);
    for (int i = 0; i < len; ++i) {
      double sum = 0.0;
      for (int j = 0; j <= i; ++j) {
        const Vec& l = L[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
        double omax = -kInf, omin = kInf;
        for (int mu = 0; mu < n; ++mu)
          if (mu != mu_tilde) {
            omax = std::max(omax, l[mu]);
            omin = std::min(omin, l[mu]);
          }
        if (n > 1) {
          r.gamma = std::min(r.gamma, l[mu_tilde] - omax);
          r.Gamma = std::max(r.Gamma, l[mu_tilde] - omin);
          if (l[mu_tilde] < omax) ++r.argmax_violations;
        }
        r.lambda_max = std::max(r.lambda_max, l[mu_tilde]);
        r.lambda_min = std::min(r.lambda_min, l[mu_tilde]);
        if (j < i) sum += l[mu_tilde];
        ++r.pairs;
      }
      if (i >= 1) r.Lambda = std::max(r.Lambda, sum);
    }
  }
  return r;
}

// =============================================================================================
// Assumption diagnostics

AssumptionDiagnostics assumption_diagnostics(const WeightSchedule<SsmParams>& s, long depth, int len, int samples,
                                             std::uint64_t seed) {
  AssumptionDiagnostics d;
  d.layers.resize(static_cast<std::size_t>(std::max(0L, depth)));
  // Layers are independent: diagnose them in parallel (each entry depends only on its layer).
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1)
  for (long k = 1; k <= depth; ++k) try {
    const auto p = s.at_layer(k);
    const int n = p->n();
    const ChannelBounds cb = channel_bounds(*p, len);
    const int mu = principal_channel(cb).first;
    const SpectralConstants sc = constants_from_bounds(cb, mu);
    LayerAssumptions la;
    la.layer = k;
    la.mu_tilde = mu;
    la.certified = sc.principal;
    la.gamma = sc.gamma;
    la.Gamma = sc.Gamma;
    la.Lambda = sc.Lambda;
    la.lambda_max = sc.lambda_max;
    la.lambda_min = sc.lambda_min;
    la.S_principal = p->S_C.col(mu).dot(p->S_B.col(mu));  // Remark IV.1: (S_BC)_{mu~mu~} > 0 suffices for PE
    la.lambda_min_sym = kernel_lambda_min(*p);             // Assumption V.1 margin (low rank: O(n m^2))
    if (samples > 0) {
      // Attained principal channel: the argmax of lambda_ij^mu most often over sampled Z.
      std::vector<long> count(static_cast<std::size_t>(n), 0);
      std::vector<Tokens> Zs;
      Rng rng(seed, {static_cast<std::uint64_t>(k)});
      for (int a = 0; a < samples; ++a) Zs.push_back(rng.sphere_tokens(len, n));
      std::vector<std::vector<std::vector<Vec>>> Ls;
      for (const auto& Z : Zs) {
        Ls.push_back(io_lambdas(*p, Z));
        for (const auto& row : Ls.back())
          for (const auto& l : row) {
            Eigen::Index am;
            l.maxCoeff(&am);
            ++count[static_cast<std::size_t>(am)];
          }
      }
      la.mu_attained = static_cast<int>(std::max_element(count.begin(), count.end()) - count.begin());
      double g = kInf;
      for (const auto& L : Ls)
        for (const auto& row : L)
          for (const auto& l : row) {
            double other = -kInf;
            for (int nu = 0; nu < n; ++nu)
              if (nu != la.mu_attained) other = std::max(other, l[nu]);
            g = std::min(g, l[la.mu_attained] - other);
          }
      la.gamma_sampled = g;
    }
    d.layers[static_cast<std::size_t>(k - 1)] = la;
  } catch (...) {
    errors.capture();
  }
  errors.rethrow();
  int prev = -1;
  bool all_cert = depth >= 1;
  for (const auto& la : d.layers) {
    if (la.certified) ++d.certified_layers;
    all_cert = all_cert && la.certified;
    if (la.layer >= 2 && la.mu_tilde != prev) ++d.principal_switches;
    prev = la.mu_tilde;
  }
  d.constant_principal = all_cert && d.principal_switches == 0;
  return d;
}

}  // namespace tokdyn
