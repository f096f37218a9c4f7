// coupling-e1's data (block-HMM streams and their Bayes risks), fits (the exponent and its
// interval), the trainer's results and failures (coupling_e1_internal.hpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include "tokdyn/analysis/block_hmm.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/parallel.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/runtime/child_jobs.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/inputs.hpp"
#include "coupling_e1_internal.hpp"

namespace tokdyn {
namespace preset_coupling_e1 {

/// A comma-separated list of choices (each once, at least one), in the order of `allowed`.
std::vector<std::string> e1_choice_list(const Params& p, const std::string& key, const std::vector<std::string>& allowed) {
  const std::string& text = p.get_string(key);
  std::string names;
  for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + a;
  std::vector<std::string> got;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end())
      throw InputError(fmt::format("parameter '{}': '{}' is not one of {}; expected a comma-separated list of them, each once", key, item, names));
    if (std::find(got.begin(), got.end(), item) != got.end())
      throw InputError(fmt::format("parameter '{}': '{}' is listed twice; expected each of {} at most once", key, item, names));
    got.push_back(item);
  }
  if (got.empty() || text.back() == ',')
    throw InputError(fmt::format("parameter '{}' = '{}': expected a comma-separated list of {} (each once, at least one)", key, text, names));
  std::vector<std::string> out;
  for (const std::string& a : allowed)
    if (std::find(got.begin(), got.end(), a) != got.end()) out.push_back(a);
  return out;
}

/// 0.975 quantile of Student's t with `df` degrees of freedom (NaN for df < 1).
double e1_t975(double df) {
  if (!(df >= 1.0)) return kNaN;
  return boost::math::quantile(boost::math::students_t_distribution<double>(df), 0.975);
}

/// The symmetric chain with persistence q in the "redraw" form: Q = (1 - 2q) I + 2q 11^T / S.
BlockHmm e1_hmm(const hmm::Emission& e, int S, int P, double q) {
  const double leave = 2.0 * q * static_cast<double>(S - 1) / static_cast<double>(S);
  BlockHmm m{hmm::symmetric_kernel(S, leave), Vector::Constant(S, 1.0 / S), P, e};
  m.validate();
  return m;
}

/// Sequences 0..N-1 of stream tag `stream` as token ids [N, T] in C order (int64).
std::vector<std::int64_t> e1_sample_ids(const BlockHmm& m, int K, long N, std::uint64_t data_seed, std::uint64_t stream) {
  const long T = static_cast<long>(K) * m.P;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(N * T));
  ParallelErrors errors;
#pragma omp parallel for schedule(static)
  for (long n = 0; n < N; ++n) {
    if (errors.failed()) continue;
    try {
      Rng rng(data_seed, {stream, static_cast<std::uint64_t>(n)});
      const hmm::Sequence s = hmm::sample(m, K, rng);
      for (long t = 0; t < T; ++t) ids[static_cast<std::size_t>(n * T + t)] = static_cast<std::int64_t>(s.x(t, 0));
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
  return ids;
}

/// Per-sequence risks over blocks 2..K (first_block = 1, 0-based) of the sequences in `ids` [N, T]:
/// column 0 R_full (hmm::sequence_risk Full: exact filtering over every previous block), column 1
/// R_local (hmm::sequence_risk Local: the within-block prefix and the marginal law of z_k), column 2
/// R_gateoff, the Bayes risk of what the model with the gate off sees: its logits at position t
/// predict token t + 1 from block-local attention, so the first token of block k is predicted from
/// the whole block k - 1 (hmm::token_losses under the PrevBlock priors) and every other token from
/// its own block's prefix (under the Local priors).
Matrix e1_sequence_risks(const BlockHmm& m, const std::vector<std::int64_t>& ids, long N, long T) {
  Matrix r(N, 3);
  const long P = m.P;
  ParallelErrors errors;
#pragma omp parallel for schedule(static)
  for (long n = 0; n < N; ++n) {
    if (errors.failed()) continue;
    try {
      Matrix x(T, 1);
      for (long t = 0; t < T; ++t) x(t, 0) = static_cast<double>(ids[static_cast<std::size_t>(n * T + t)]);
      r(n, 0) = hmm::sequence_risk(m, x, Summary::Full, 1);
      r(n, 1) = hmm::sequence_risk(m, x, Summary::Local, 1);
      const Matrix tokll = hmm::token_loglik(m, x);
      const Vector prev = hmm::token_losses(tokll, hmm::predictor_priors(m, x, tokll, Summary::PrevBlock), m.P);
      const Vector local = hmm::token_losses(tokll, hmm::predictor_priors(m, x, tokll, Summary::Local), m.P);
      double sum = 0.0;
      for (long t = P; t < T; ++t) sum += t % P == 0 ? prev(t) : local(t);
      r(n, 2) = sum / static_cast<double>(T - P);
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
  return r;
}


E1Fit e1_fit(const std::vector<double>& params, const std::vector<double>& excess) {
  E1Fit f;
  std::vector<double> x, y;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (excess[i] > 0.0 && params[i] > 0.0) {
      x.push_back(std::log(params[i]));
      y.push_back(std::log(excess[i]));
    } else {
      ++f.dropped;
    }
  }
  f.points = static_cast<int>(x.size());
  const double n = static_cast<double>(x.size());
  if (x.size() < 2) return f;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxx = 0.0, sxy = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (!(sxx > 0.0)) return f;  // one size only: no slope
  const double b = sxy / sxx;
  f.alpha = -b;
  f.c = my - b * mx;
  if (x.size() >= 3) {
    double ssr = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) ssr += (y[i] - f.c - b * x[i]) * (y[i] - f.c - b * x[i]);
    f.se = std::sqrt(ssr / (n - 2.0) / sxx);
    const double h = e1_t975(n - 2.0) * f.se;
    f.lo = f.alpha - h;
    f.hi = f.alpha + h;
  }
  return f;
}

/// Mean and standard error of values (se NaN below 2 values).
hmm::Estimate e1_mean_se(const std::vector<double>& v) {
  if (v.empty()) return {kNaN, kNaN};
  const double n = static_cast<double>(v.size());
  const double m = std::accumulate(v.begin(), v.end(), 0.0) / n;
  if (v.size() < 2) return {m, kNaN};
  double ss = 0.0;
  for (double x : v) ss += (x - m) * (x - m);
  return {m, std::sqrt(ss / (n - 1.0) / n)};
}
double e1_sd(const std::vector<double>& v) {
  const hmm::Estimate e = e1_mean_se(v);
  return e.se * std::sqrt(static_cast<double>(v.size()));
}

/// Reads DIR/result.json and DIR/loss.csv of a finished training (a malformed file is a bug of
/// the trainer or of this reader: std::logic_error).
void e1_read_results(E1Training& t) {
  const fs::path rj = t.dir / "result.json";
  std::ifstream in(rj);
  if (!in) throw std::logic_error(fmt::format("coupling-e1: the trainer exited 0 without writing {}", rj.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    t.heldout = j.at("heldout_loss").get<double>();
    t.trained_rho = j.at("rho").get<double>();
    t.injection = j.at("injection_norm").get<double>();
    t.unigram = j.at("unigram_entropy").get<double>();
    t.seconds = j.at("seconds").get<double>();
    t.params = j.at("params").at("total").get<long>();
    t.params_slow = j.at("params").at("slow").get<long>();
    t.tokens_seen = j.at("tokens_seen").get<long>();
  } catch (const nlohmann::json::exception& e) {
    throw std::logic_error(fmt::format("coupling-e1: {} is not the trainer's result: {}", rj.string(), e.what()));
  }
  std::ifstream lc(t.dir / "loss.csv");
  std::string line;
  if (!std::getline(lc, line) || line != "step,train_loss,heldout_loss,heldout_sequences")
    throw std::logic_error(fmt::format("coupling-e1: {}: unexpected header '{}'", (t.dir / "loss.csv").string(), line));
  while (std::getline(lc, line)) {
    if (line.empty()) continue;
    std::vector<std::string> c;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) c.push_back(cell);
    if (line.back() == ',') c.emplace_back();
    if (c.size() != 4) throw std::logic_error(fmt::format("coupling-e1: {}: malformed row '{}'", (t.dir / "loss.csv").string(), line));
    E1Training::Row r;
    try {
      r.step = std::stol(c[0]);
      r.train_loss = c[1].empty() ? kNaN : std::stod(c[1]);
      r.heldout = std::stod(c[2]);
      r.sequences = std::stol(c[3]);
    } catch (const std::exception&) {
      throw std::logic_error(fmt::format("coupling-e1: {}: malformed row '{}'", (t.dir / "loss.csv").string(), line));
    }
    t.curve.push_back(r);
  }
  if (t.curve.empty()) throw std::logic_error(fmt::format("coupling-e1: {}: no rows", (t.dir / "loss.csv").string()));
}


/// The trainer's arguments that come from the user's parameters: the trainer's own refusal of one of
/// them names it as --flag; any other refusal is of tokdyn's own arguments (a bug).
const std::vector<std::pair<std::string, std::string>> kE1UserFlags = {{"--steps", "steps"}, {"--lr", "lr"}, {"--batch", "batch"}};

/// The error of a failed training (exit status != 0 or a signal).
[[noreturn]] void e1_failed(const E1Training& t, const E1Data& d, const ChildExit& ex) {
  const std::string what = fmt::format("coupling-e1: training q = {}, size {}, rho {}, seed {} (python -m tokdyn_train.e1 --seed {})", d.q,
                                       t.size, t.rho, t.seed_index, t.trainer_seed);
  const std::string line = ex.last_line.empty() ? std::string("(no message)") : ex.last_line;
  if (ex.signal != 0) {
    if (ex.signal == 9)
      throw ResourceError(fmt::format("{} was killed by SIGKILL (out of memory? lower jobs, batch or the sequence length)", what));
    throw std::runtime_error(fmt::format("{} was killed by signal {}: {}", what, ex.signal, line));
  }
  if (ex.code == 4) throw NonFiniteError(fmt::format("{}: {}", what, line));
  if (ex.code == 2) {
    for (const auto& [flag, key] : kE1UserFlags)
      if (line.find("e1: " + flag + " ") == 0) throw InputError(fmt::format("parameter '{}': {} refused it: {}", key, what, line));
    throw std::logic_error(fmt::format("{} refused tokdyn's arguments (exit 2): {}", what, line));
  }
  std::string hint;
  if (line.find("No module named") != std::string::npos)
    hint = " (the trainer needs Debian's python3-torch and python3-numpy for /usr/bin/python3, or TOKDYN_PYTHON)";
  throw std::runtime_error(fmt::format("{} failed with exit status {}: {}{}", what, ex.code, line, hint));
}

}  // namespace preset_coupling_e1
}  // namespace tokdyn
