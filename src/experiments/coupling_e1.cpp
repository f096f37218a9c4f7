// Preset coupling-e1: experiment E1 of the coupling paper (§6 "Scaling laws, conditionally";
// engineering spec §6.3), the conditional scaling law. Synthetic block-HMM data (§5.3, spec §2.16)
// with the latent persistence q varied from 1/2 (i.i.d. blocks) down to 0.01; the hierarchical model
// (C1)-(C2) trained at several sizes with its gate rho learned or off (PyTorch,
// python/tokdyn_train/e1.py, one child process per training, `jobs` at a time, each on one thread).
//
// The paper's predictions, checked (checks.csv):
//   E1 gate      the trained gate opens only when q < 1/2: the held-out gain loss(off) - loss(learn)
//                is within noise at q = 1/2 and positive beyond noise below it; the gate's use (the
//                injection norm |rho psi(y)|, free of the rho / psi scale confound F14) and |rho| are
//                larger at the most persistent q than at q = 1/2;
//   E1 exponent  the exponent alpha of excess loss against parameters, log(excess) = c - alpha
//                log(params), responds to q: alpha at q = 1/2 against alpha at the smallest q, a
//                three-way decision on the 95 % confidence interval of their difference;
//   E1 bound     every trained held-out loss is at least the Bayes risk of the same tokens (less one
//                standard error); with the gate off the model is block-local, so its loss is at
//                least R_gateoff, the Bayes risk of what it sees (its own block's prefix, and for a
//                block's first token the whole previous block: the logits at the last position of
//                block k-1 predict it);
//   E1 data      q = 1/2 is the i.i.d. point (R_full = R_local per sequence); the Bayes risks of the
//                files the trainer reads equal those of the sampler's streams; the trainer's unigram
//                entropy equals tokdyn's.
//
// The data: S latent states, the chain Q = (1 - 2q) I + 2q 11^T / S (stay, or redraw uniformly with
// probability 2q: tokdyn's symmetric_kernel(S, 2q (S-1)/S)), so that q = 1/2 is the i.i.d. point for
// every S and the chain's second eigenvalue is 1 - 2q, as for the paper's two-state chain; blocks of
// P categorical tokens over V symbols, i.i.d. given the latent, logits contrast x N(0, 1) per (state,
// symbol) (stream (data_seed, kE1Emission)). Sequence n of the training (held-out) split is drawn by
// hmm::sample from stream (data_seed, {kE1Train (kE1Heldout), n}): the same random numbers at every
// q (common random numbers), so the q's differ only by the chain.
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

// The limits the schema cannot express (products of parameters): checked by the estimate, before a
// run announces or allocates anything, and again by the run.
void check_e1_sizes(const Params& p) {
  const long K = p.get_int("blocks"), P = p.get_int("block"), T = K * P;
  const long Ntr = p.get_int("train_sequences"), Nho = p.get_int("heldout_sequences");
  if (T > 4096) throw InputError(fmt::format("parameters 'blocks' x 'block' = {} x {} = {} tokens per sequence; expected at most 4096", K, P, T));
  if (static_cast<double>(Ntr) * static_cast<double>(T) > 67108864.0)
    throw InputError(fmt::format("parameters 'train_sequences' x tokens per sequence = {} x {}; expected at most 2^26 token ids", Ntr, T));
  if (static_cast<double>(Nho) * static_cast<double>(T) > 67108864.0)
    throw InputError(fmt::format("parameters 'heldout_sequences' x tokens per sequence = {} x {}; expected at most 2^26 token ids", Nho, T));
}

void run_e1(const Params& p, RunContext& ctx) {
  // ---- Parameters the schema cannot express --------------------------------------------------------
  const std::vector<double> qs = p.get_double_list("q");
  const std::vector<std::string> sizes = e1_choice_list(p, "sizes", kE1Sizes);
  const std::vector<std::string> rhos = e1_choice_list(p, "rho_modes", kE1RhoModes);
  const int seeds = static_cast<int>(p.get_int("seeds"));
  const long steps = p.get_int("steps"), batch = p.get_int("batch");
  const double lr = p.get_double("lr"), contrast = p.get_double("contrast");
  const int S = static_cast<int>(p.get_int("states")), V = static_cast<int>(p.get_int("vocab"));
  const int P = static_cast<int>(p.get_int("block")), K = static_cast<int>(p.get_int("blocks"));
  const long Ntr = p.get_int("train_sequences"), Nho = p.get_int("heldout_sequences");
  const auto data_seed = static_cast<std::uint64_t>(p.get_int("data_seed"));
  const auto seed = static_cast<std::uint64_t>(p.get_int("seed"));
  const double alpha_tol = p.get_double("alpha_tolerance");
  const int jobs = p.get_int("jobs") > 0 ? static_cast<int>(p.get_int("jobs")) : std::max(1, ctx.threads);
  const long T = static_cast<long>(K) * P;
  check_e1_sizes(p);

  const fs::path work = ctx.dir / "e1-work";  // private: the trainers' folders and data, removed at the end
  fs::create_directories(work);
  const auto progress = [&](double f) {
    if (ctx.progress) ctx.progress(std::clamp(f, 0.0, 1.0));
  };

  // ---- The data, per q ------------------------------------------------------------------------------
  Matrix logits(S, V);
  {
    Rng rng(data_seed, {kE1Emission});
    for (int z = 0; z < S; ++z)
      for (int v = 0; v < V; ++v) logits(z, v) = contrast * rng.normal();
  }
  const hmm::Emission emission = hmm::Emission::categorical(logits);
  write_input_matrix(ctx, "emission_logits.npy", logits,
                     fmt::format("emission logits theta(z, x) [states, vocab] = contrast x N(0, 1), stream (data_seed, {:#x}); "
                                 "e(x | z) = softmax of row z",
                                 kE1Emission));
  std::vector<E1Data> data;
  {
    auto phase = ctx.phase("data");
    for (std::size_t qi = 0; qi < qs.size(); ++qi) {
      E1Data d;
      d.q = qs[qi];
      d.tag = fmt::format("q{}", d.q);
      const BlockHmm m = e1_hmm(emission, S, P, d.q);
      const std::vector<std::int64_t> tr = e1_sample_ids(m, K, Ntr, data_seed, kE1Train);
      const std::vector<std::int64_t> ho = e1_sample_ids(m, K, Nho, data_seed, kE1Heldout);
      d.train_file = work / (d.tag + "_train.npy");
      d.heldout_file = work / (d.tag + "_heldout.npy");
      write_npy(d.train_file, tr.data(), {static_cast<std::size_t>(Ntr), static_cast<std::size_t>(T)});
      write_npy(d.heldout_file, ho.data(), {static_cast<std::size_t>(Nho), static_cast<std::size_t>(T)});
      write_input_ids(ctx, d.tag + "_train.npy", tr, {static_cast<std::size_t>(Ntr), static_cast<std::size_t>(T)},
                      fmt::format("training token ids [sequences, tokens] at q = {} (sequence n: stream (data_seed, {{{:#x}, n}}))", d.q, kE1Train));
      write_input_ids(ctx, d.tag + "_heldout.npy", ho, {static_cast<std::size_t>(Nho), static_cast<std::size_t>(T)},
                      fmt::format("held-out token ids [sequences, tokens] at q = {} (sequence n: stream (data_seed, {{{:#x}, n}}))", d.q, kE1Heldout));

      // The references on the file the trainer reads (read back), and on the sampler's streams.
      std::vector<std::size_t> shape;
      const std::vector<std::int64_t> back = read_npy_int(d.heldout_file, shape, static_cast<std::uint64_t>(Nho * T));
      if (shape != std::vector<std::size_t>{static_cast<std::size_t>(Nho), static_cast<std::size_t>(T)} || back != ho)
        throw std::logic_error(fmt::format("coupling-e1: {} does not read back as written", d.heldout_file.string()));
      const Matrix risk = e1_sequence_risks(m, back, Nho, T);
      d.bayes = hmm::column_estimate(risk, 0);
      d.local = hmm::column_estimate(risk, 1);
      d.gateoff = hmm::column_estimate(risk, 2);
      d.gap = hmm::paired_gap(risk, 2, 0);
      const Matrix mc = hmm::monte_carlo_losses(m, K, Nho, data_seed, kE1Heldout, {Summary::Full, Summary::Local}, 1);
      d.stream_max_diff = (mc - risk.leftCols(2)).cwiseAbs().maxCoeff();
      if (d.q == 0.5) d.iid_max_diff = (risk.col(0) - risk.col(1)).cwiseAbs().maxCoeff();
      std::vector<double> counts(static_cast<std::size_t>(V), 0.0);
      for (long n = 0; n < Nho; ++n)
        for (long t = P; t < T; ++t) counts[static_cast<std::size_t>(back[static_cast<std::size_t>(n * T + t)])] += 1.0;
      d.heldout_tokens = Nho * (T - P);
      double h = 0.0;
      for (double c : counts)
        if (c > 0.0) {
          const double pr = c / static_cast<double>(d.heldout_tokens);
          h -= pr * std::log(pr);
        }
      d.unigram_entropy = h;
      data.push_back(d);
      progress(0.05 * static_cast<double>(qi + 1) / static_cast<double>(qs.size()));
    }
  }

  // ---- The trainings ----------------------------------------------------------------------------------
  std::vector<E1Training> runs;
  for (std::size_t qi = 0; qi < qs.size(); ++qi)
    for (const std::string& size : sizes)
      for (const std::string& rho : rhos)
        for (int i = 0; i < seeds; ++i) {
          E1Training t;
          t.qi = qi;
          t.size = size;
          t.rho = rho;
          t.seed_index = i;
          Rng r(seed, {kE1TrainerSeed, static_cast<std::uint64_t>(i)});
          t.trainer_seed = r.next_u64() >> 12;  // 52 bits: exact in JSON and in the CSV
          t.dir = work / t.id();
          runs.push_back(t);
        }
  // Largest models first (the slowest; the tail is then short), else in table order.
  std::vector<std::size_t> order(runs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return e1_width(runs[a].size) > e1_width(runs[b].size); });
  const PythonCommand py = python_command("tokdyn_train.e1");
  std::vector<ChildJob> cj;
  for (std::size_t k : order) {
    const E1Training& t = runs[k];
    fs::create_directories(t.dir);
    ChildJob j;
    j.argv = py.argv;
    for (const std::string& a :
         {std::string("--train"), data[t.qi].train_file.string(), std::string("--heldout"), data[t.qi].heldout_file.string(), std::string("--vocab"),
          std::to_string(V), std::string("--block"), std::to_string(P), std::string("--size"), t.size, std::string("--rho"), t.rho,
          std::string("--seed"), std::to_string(t.trainer_seed), std::string("--steps"), std::to_string(steps), std::string("--lr"),
          fmt::format("{}", lr), std::string("--batch"), std::to_string(batch), std::string("--threads"), std::string("1"),
          std::string("--out"), t.dir.string()})
      j.argv.push_back(a);
    j.env = py.env;
    j.stderr_file = t.dir / "stderr.txt";
    cj.push_back(std::move(j));
  }
  {
    auto phase = ctx.phase("training");
    std::size_t done = 0;
    run_child_jobs(cj, jobs, [&](std::size_t j, const ChildExit& ex) {
      E1Training& t = runs[order[j]];
      if (!ex.ok()) e1_failed(t, data[t.qi], ex);
      e1_read_results(t);
      ++done;
      progress(0.05 + 0.95 * static_cast<double>(done) / static_cast<double>(runs.size()));
    });
  }

  // ---- Tables -------------------------------------------------------------------------------------------
  {
    CsvWriter h = ctx.table("hmm.csv");
    for (const E1Data& d : data) {
      h.cell(d.q).cell(2.0 * d.q * (S - 1) / S).cell(1.0 - 2.0 * d.q).cell(d.bayes.mean).cell(d.bayes.se).cell(d.local.mean).cell(d.local.se);
      h.cell(d.gateoff.mean).cell(d.gateoff.se);
      h.cell(d.gap.mean).cell(d.gap.se).cell(d.unigram_entropy).cell(d.heldout_tokens).end_row();
    }
  }
  nlohmann::json secs = nlohmann::json::object();
  {
    CsvWriter w = ctx.table("runs.csv");
    CsvWriter c = ctx.table("curves.csv");
    c.blank_nonfinite({"train_loss"});
    for (const E1Training& t : runs) {
      const E1Data& d = data[t.qi];
      w.cell(d.q).cell(t.size).cell(t.rho).cell(t.seed_index).cell(static_cast<long>(t.trainer_seed)).cell(t.params).cell(t.params_slow);
      w.cell(t.heldout).cell(d.bayes.mean).cell(d.bayes.se).cell(d.gateoff.mean).cell(t.heldout - d.bayes.mean).cell(d.unigram_entropy);
      w.cell(t.trained_rho).cell(std::abs(t.trained_rho)).cell(t.injection).cell(t.tokens_seen).end_row();
      for (const E1Training::Row& r : t.curve)
        c.cell(d.q).cell(t.size).cell(t.rho).cell(t.seed_index).cell(r.step).cell(r.train_loss).cell(r.heldout).cell(r.sequences).end_row();
      secs[t.id()] = t.seconds;
    }
  }

  // ---- Fits and gains per q ---------------------------------------------------------------------------
  struct QStats {
    E1Fit fit[2];                  ///< per rho mode (index into kE1RhoModes)
    bool has[2] = {false, false};
    hmm::Estimate gain{kNaN, kNaN};
    double gain_half = kNaN;       ///< t_{0.975, n-1} x standard error of the paired gains
    long pairs = 0;
    std::vector<double> abs_rho[2], inj[2], loss[2];
  };
  std::vector<QStats> st(qs.size());
  const auto mode_index = [](const std::string& r) { return r == "learn" ? 0 : 1; };
  for (std::size_t qi = 0; qi < qs.size(); ++qi) {
    QStats& s = st[qi];
    std::vector<double> prm[2], exc[2];
    std::map<std::pair<std::string, int>, double> learn_loss, off_loss;
    for (const E1Training& t : runs) {
      if (t.qi != qi) continue;
      const int m = mode_index(t.rho);
      s.has[m] = true;
      prm[m].push_back(static_cast<double>(t.params));
      exc[m].push_back(t.heldout - data[qi].bayes.mean);
      s.abs_rho[m].push_back(std::abs(t.trained_rho));
      s.inj[m].push_back(t.injection);
      s.loss[m].push_back(t.heldout);
      (m == 0 ? learn_loss : off_loss)[{t.size, t.seed_index}] = t.heldout;
    }
    for (int m = 0; m < 2; ++m)
      if (s.has[m]) s.fit[m] = e1_fit(prm[m], exc[m]);
    std::vector<double> g;
    for (const auto& [key, l] : learn_loss)
      if (off_loss.count(key)) g.push_back(off_loss.at(key) - l);
    s.pairs = static_cast<long>(g.size());
    s.gain = e1_mean_se(g);
    s.gain_half = e1_t975(static_cast<double>(g.size()) - 1.0) * s.gain.se;
  }
  {
    CsvWriter f = ctx.table("fits.csv");
    f.blank_nonfinite({"alpha", "alpha_stderr", "alpha_lo", "alpha_hi", "intercept", "gain", "gain_stderr", "gain_halfwidth", "sd_abs_rho",
                       "sd_injection_norm"});
    for (std::size_t qi = 0; qi < qs.size(); ++qi) {
      const QStats& s = st[qi];
      for (int m = 0; m < 2; ++m) {
        if (!s.has[m]) continue;
        const E1Fit& fit = s.fit[m];
        const hmm::Estimate loss = e1_mean_se(s.loss[m]), ar = e1_mean_se(s.abs_rho[m]), in = e1_mean_se(s.inj[m]);
        f.cell(qs[qi]).cell(kE1RhoModes[static_cast<std::size_t>(m)]).cell(fit.points).cell(fit.dropped).cell(fit.alpha).cell(fit.se).cell(fit.lo)
            .cell(fit.hi).cell(fit.c);
        f.cell(s.gain.mean).cell(s.gain.se).cell(s.gain_half).cell(s.pairs).cell(loss.mean).cell(ar.mean).cell(e1_sd(s.abs_rho[m])).cell(in.mean)
            .cell(e1_sd(s.inj[m]))
            .end_row();
      }
    }
  }

  // ---- Checks ---------------------------------------------------------------------------------------------
  CheckTable checks(ctx.dir / "checks.csv");
  const auto iid_it = std::find(qs.begin(), qs.end(), 0.5);
  const std::size_t qmin = static_cast<std::size_t>(std::min_element(qs.begin(), qs.end()) - qs.begin());
  const bool have_iid = iid_it != qs.end();
  const std::size_t qiid = have_iid ? static_cast<std::size_t>(iid_it - qs.begin()) : 0;
  const bool both_modes = rhos.size() == 2;
  const bool learn_mode = std::find(rhos.begin(), rhos.end(), "learn") != rhos.end();
  const Ref gate_ref = qualitative("E1 (§6 'Scaling laws, conditionally'; spec §6.3): the trained gate opens only when q < 1/2");
  const std::string gain_expected = "t_{0.975, n-1} x standard error of the gains paired by size and seed";
  // (1) the gate: within noise at q = 1/2, positive beyond noise below it.
  {
    const std::string stmt = "E1: with independent blocks (q = 1/2) a learned gate gains nothing (Prop 13: the slow path is dead weight)";
    const std::string qty = "|gain| at q = 1/2, gain = held-out loss (rho off) - held-out loss (rho learned), mean over sizes and seeds";
    std::string why;
    if (!have_iid) why = "q = 0.5 (the i.i.d. point) is not in the q list";
    else if (!both_modes) why = "needs both rho modes (rho_modes = learn,off)";
    else if (!(st[qiid].pairs >= 2)) why = "needs at least 2 paired trainings (sizes x seeds) for the noise level";
    if (!why.empty()) checks.not_applicable("E1 gate", stmt, qty, why, gate_ref);
    else {
      const QStats& s = st[qiid];
      checks.add("E1 gate", stmt, qty, std::abs(s.gain.mean), fmt::format("<= {:.3g} ({}; n = {})", s.gain_half, gain_expected, s.pairs),
                 std::abs(s.gain.mean) <= s.gain_half, gate_ref);
    }
  }
  for (std::size_t qi = 0; qi < qs.size(); ++qi) {
    if (qs[qi] >= 0.5) continue;
    const std::string stmt = "E1: with persistent latents (q < 1/2) the learned gate opens: it lowers the held-out loss";
    const std::string qty = fmt::format("gain - noise at q = {}: mean gain minus its 95 % half-width (gain = loss(off) - loss(learn))", qs[qi]);
    const QStats& s = st[qi];
    std::string why;
    if (!both_modes) why = "needs both rho modes (rho_modes = learn,off)";
    else if (!(s.pairs >= 2)) why = "needs at least 2 paired trainings (sizes x seeds) for the noise level";
    if (!why.empty()) checks.not_applicable("E1 gate", stmt, qty, why, gate_ref);
    else
      checks.add("E1 gate", stmt, qty, s.gain.mean - s.gain_half,
                 fmt::format("> 0 (gain {:.4g} nats/token, half-width {:.3g}: {}; n = {})", s.gain.mean, s.gain_half, gain_expected, s.pairs),
                 s.gain.mean - s.gain_half > 0.0, gate_ref);
  }
  // The gate's use and |rho| grow with persistence (learned runs): most persistent q against q = 1/2.
  for (const char* what : {"injection_norm", "abs_rho"}) {
    const bool inj = std::string(what) == "injection_norm";
    const std::string stmt = inj ? "E1: the gate is used only under persistence: the injection |rho psi(y)| is larger at the most persistent q than at q = 1/2"
                                 : "E1: the trained |rho| is larger at the most persistent q than at q = 1/2 (rho is confounded with psi's scale, F14)";
    const std::string qty = fmt::format("({0} at q = {1} - {0} at q = 1/2) / its Welch 95 % half-width (learned gate; means over sizes and seeds)",
                                        inj ? "mean injection norm" : "mean |rho|", qs[qmin]);
    std::string why;
    if (!have_iid) why = "q = 0.5 (the i.i.d. point) is not in the q list";
    else if (!learn_mode) why = "needs trainings with a learned gate (rho_modes with learn)";
    else if (qs[qmin] >= 0.5) why = "needs a q < 1/2 in the q list";
    if (!why.empty()) {
      checks.not_applicable("E1 gate", stmt, qty, why, gate_ref);
      continue;
    }
    const std::vector<double>& a = inj ? st[qmin].inj[0] : st[qmin].abs_rho[0];
    const std::vector<double>& b = inj ? st[qiid].inj[0] : st[qiid].abs_rho[0];
    const hmm::Estimate ea = e1_mean_se(a), eb = e1_mean_se(b);
    // Welch: the difference over t_{0.975, df} x its standard error (df by Welch-Satterthwaite).
    const double va = ea.se * ea.se, vb = eb.se * eb.se, se = std::sqrt(va + vb);
    const double df = (va + vb) * (va + vb) / (va * va / (static_cast<double>(a.size()) - 1.0) + vb * vb / (static_cast<double>(b.size()) - 1.0));
    const double ratio = (ea.mean - eb.mean) / (e1_t975(df) * se);
    checks.add("E1 gate", stmt, qty, ratio,
               fmt::format("> 1 (means {:.4g} vs {:.4g}; Welch 95 % half-width {:.3g})", ea.mean, eb.mean, e1_t975(df) * se), ratio > 1.0, gate_ref);
  }
  // (2) the exponent responds to q: three-way decision on delta = alpha(q_min) - alpha(1/2).
  {
    const std::string stmt = "E1: the loss-versus-size exponent responds to persistence (learned gate)";
    const std::string qty = fmt::format("delta = alpha(q = {}) - alpha(q = 1/2), alpha the exponent of log(excess) = c - alpha log(params)", qs[qmin]);
    const Ref ref = qualitative("E1 (§6; spec §6.3): the exponent responds to q; tolerance alpha_tolerance");
    std::string why;
    if (!have_iid) why = "q = 0.5 (the i.i.d. point) is not in the q list";
    else if (qs[qmin] >= 0.5) why = "needs a q < 1/2 in the q list";
    else if (!learn_mode) why = "needs trainings with a learned gate";
    else if (!std::isfinite(st[qmin].fit[0].se) || !std::isfinite(st[qiid].fit[0].se))
      why = "an exponent has no confidence interval (needs >= 2 sizes and >= 3 points with excess > 0)";
    if (!why.empty()) checks.not_applicable("E1 exponent", stmt, qty, why, ref);
    else {
      const E1Fit &a = st[qmin].fit[0], &b = st[qiid].fit[0];
      const double delta = a.alpha - b.alpha, se = std::hypot(a.se, b.se);
      const double df = std::min(a.points, b.points) - 2.0;  // conservative: the smaller fit's degrees of freedom
      const double h = e1_t975(df) * se, lo = delta - h, hi = delta + h;
      const std::string ci = fmt::format("95 % CI [{:.3g}, {:.3g}] (t_{{0.975, {}}} x sqrt(se_1^2 + se_2^2)); tolerance {}", lo, hi, df, alpha_tol);
      if (lo > alpha_tol || hi < -alpha_tol)
        checks.add("E1 exponent", stmt, qty, delta, "|delta| > tolerance with the whole CI outside [-tol, tol]: " + ci, true, ref);
      else if (lo >= -alpha_tol && hi <= alpha_tol)
        checks.add("E1 exponent", stmt, qty, delta, "the whole CI inside [-tol, tol] would mean no response: " + ci, false, ref);
      else
        checks.undecided("E1 exponent", stmt, qty, delta, "undecided: the CI reaches both inside and outside [-tol, tol]: " + ci, ref);
    }
  }
  // (3) bounds: Bayes risk of the same tokens; with the gate off, the Bayes risk of what it sees.
  {
    double worst = kInf, worst_off = kInf;
    std::string where, where_off;
    for (const E1Training& t : runs) {
      const E1Data& d = data[t.qi];
      const double z = (t.heldout - d.bayes.mean) / d.bayes.se;
      if (z < worst) {
        worst = z;
        where = fmt::format("q = {}, size {}, rho {}, seed {}", d.q, t.size, t.rho, t.seed_index);
      }
      if (t.rho == "off") {
        const double zl = (t.heldout - d.gateoff.mean) / d.gateoff.se;
        if (zl < worst_off) {
          worst_off = zl;
          where_off = fmt::format("q = {}, size {}, seed {}", d.q, t.size, t.seed_index);
        }
      }
    }
    checks.add("E1 bound", "no predictor beats the Bayes risk: held-out loss >= R_full (exact filtering of the block HMM) on the same tokens",
               "min over trainings of (held-out loss - R_full) / stderr(R_full) (smallest at " + where + ")", worst,
               ">= -1 (one Monte Carlo standard error of the held-out set's Bayes risk)", worst >= -1.0,
               bound("R_full = hmm::sequence_risk(Full, first_block 1) averaged over the held-out sequences"));
    if (std::isfinite(worst_off))
      checks.add("E1 bound", "(C1)-(C2) at rho = 0 is a block-local Transformer: held-out loss >= R_gateoff, the Bayes risk of what it sees",
                 "min over trainings with the gate off of (held-out loss - R_gateoff) / stderr(R_gateoff) (smallest at " + where_off + ")", worst_off,
                 ">= -1 (one standard error)", worst_off >= -1.0,
                 bound("R_gateoff: hmm::token_losses under the Local priors (within-block prefix), under the PrevBlock priors for each block's first "
                       "token (predicted at the last position of the previous block)"));
    else
      checks.not_applicable("E1 bound", "(C1)-(C2) at rho = 0 is a block-local Transformer: held-out loss >= R_gateoff, the Bayes risk of what it sees",
                            "min over trainings with the gate off of (held-out loss - R_gateoff) / stderr", "no training with the gate off",
                            bound("R_gateoff: hmm::token_losses under the Local and PrevBlock priors"));
  }
  // (4) the data.
  {
    double stream = 0.0, uni = 0.0;
    for (const E1Data& d : data) stream = std::max(stream, d.stream_max_diff);
    for (const E1Training& t : runs) uni = std::max(uni, std::abs(t.unigram - data[t.qi].unigram_entropy));
    if (have_iid)
      checks.add("E1 data", "Prop 13: at q = 1/2 the blocks are independent (Q's rows equal), so R_full = R_local per sequence",
                 "max over held-out sequences at q = 1/2 of |R_full - R_local|", data[qiid].iid_max_diff, "<= 1e-12",
                 data[qiid].iid_max_diff <= 1e-12, closed_form("0: Q = (1 - 2q) I + 2q 11^T/S has equal rows at q = 1/2"));
    else
      checks.not_applicable("E1 data", "Prop 13: at q = 1/2 the blocks are independent, so R_full = R_local per sequence",
                            "max over held-out sequences at q = 1/2 of |R_full - R_local|", "q = 0.5 is not in the q list",
                            closed_form("0: equal rows of Q at q = 1/2"));
    checks.add("E1 data", "the held-out files the trainer reads are the sampler's sequences",
               "max over q, sequences and {R_full, R_local} of |risk of the .npy file read back - hmm::monte_carlo_losses on the same streams|", stream,
               "== 0 (the same bits)", stream == 0.0, consistency("hmm::monte_carlo_losses(data_seed, kE1Heldout stream) vs the file read back"));
    checks.add("E1 data", "the trainer scores the same held-out tokens (positions P..T-1) as tokdyn's references",
               "max over trainings of |unigram entropy (trainer, NumPy) - unigram entropy (tokdyn)|", uni, "<= 1e-12", uni <= 1e-12,
               independent("tokdyn_train.e1 result.json unigram_entropy (NumPy bincount of the held-out tokens after the first block)"));
  }
  checks.report(ctx, "coupling-e1");

  // ---- Summaries, notes -------------------------------------------------------------------------------
  // A mode that was not trained has no fit (NaN) and no values (mean NaN): its summaries are empty.
  const auto at = [&](bool ok, std::size_t qi, auto f) { return ok ? f(st[qi]) : kNaN; };
  const bool li = have_iid, lp = true, oi = have_iid, op = true;
  ctx.summary("trainings", static_cast<long>(runs.size()));
  ctx.summary("gain_iid", at(have_iid, qiid, [](const QStats& s) { return s.gain.mean; }));
  ctx.summary("gain_iid_halfwidth", at(have_iid, qiid, [](const QStats& s) { return s.gain_half; }));
  ctx.summary("gain_persistent", st[qmin].gain.mean);
  ctx.summary("gain_persistent_halfwidth", st[qmin].gain_half);
  ctx.summary("alpha_learn_iid", at(li, qiid, [](const QStats& s) { return s.fit[0].alpha; }));
  ctx.summary("alpha_learn_persistent", at(lp, qmin, [](const QStats& s) { return s.fit[0].alpha; }));
  ctx.summary("alpha_off_iid", at(oi, qiid, [](const QStats& s) { return s.fit[1].alpha; }));
  ctx.summary("alpha_off_persistent", at(op, qmin, [](const QStats& s) { return s.fit[1].alpha; }));
  ctx.summary("injection_norm_iid", at(li, qiid, [](const QStats& s) { return e1_mean_se(s.inj[0]).mean; }));
  ctx.summary("injection_norm_persistent", at(lp, qmin, [](const QStats& s) { return e1_mean_se(s.inj[0]).mean; }));
  ctx.summary("abs_rho_iid", at(li, qiid, [](const QStats& s) { return e1_mean_se(s.abs_rho[0]).mean; }));
  ctx.summary("abs_rho_persistent", at(lp, qmin, [](const QStats& s) { return e1_mean_se(s.abs_rho[0]).mean; }));
  ctx.summary("bayes_gap_persistent", data[qmin].gap.mean);
  ctx.notes["training_seconds"] = secs;
  ctx.notes["trainer"] = fmt::format("{} -m tokdyn_train.e1 --train inputs/<q>_train.npy --heldout inputs/<q>_heldout.npy --vocab {} --block {} "
                                     "--size SIZE --rho MODE --seed TRAINER_SEED --steps {} --lr {} --batch {} --threads 1 --out DIR "
                                     "(PYTHONPATH=<tokdyn>/python; TRAINER_SEED: runs.csv)",
                                     py.argv[0], V, P, steps, lr, batch);
  ctx.notes["jobs"] = jobs;
  ctx.notes["chain"] = "Q = (1 - 2q) I + 2q 11^T / S = symmetric_kernel(S, 2q (S-1)/S): i.i.d. latents at q = 1/2, second eigenvalue 1 - 2q";
  ctx.notes["risk_positions"] = "held-out tokens P+1..T (1-based) of every sequence: the trainer's heldout_loss and hmm::sequence_risk(first_block = 1)";
  ctx.notes["fit"] = "log(excess) = c - alpha log(params) by least squares over sizes, every seed a point (excess <= 0 dropped); 95 % CI "
                     "alpha +- t_{0.975, n-2} x its standard error";
  std::error_code ec;
  fs::remove_all(work, ec);
  if (ec) throw ResourceError(fmt::format("cannot remove the work folder {}: {}", work.string(), ec.message()));
}

OutputDecl e1_outputs() {
  const std::vector<std::pair<std::string, std::string>> size_values = {
      {"s", "d = 16, depth 3 (tokdyn_train.hierarchical.SIZES)"}, {"m", "d = 32, depth 3"}, {"l", "d = 64, depth 3"}};
  const std::vector<std::pair<std::string, std::string>> rho_values = {
      {"learn", "the gate rho a learned scalar starting at 0"}, {"off", "rho fixed at 0: a block-local Transformer (psi dead weight)"}};
  OutputDecl o;
  o.tables = {
      checks_table(),
      {"hmm.csv", "one latent persistence q: the block HMM's reference risks on the held-out set",
       {real("q", "latent persistence q (the chain redraws its state with probability 2q per block; i.i.d. at q = 1/2)"),
        real("switch_probability", "probability that z_{k+1} != z_k: 2q (S-1)/S"),
        real("lambda2", "second eigenvalue of Q: 1 - 2q (the persistence)"),
        real("bayes_risk", "R_full: Bayes risk of the held-out tokens after the first block (exact filtering, hmm::sequence_risk Full)", "nat"),
        real("bayes_stderr", "its standard error over held-out sequences", "nat"),
        real("local_risk", "R_local: the block-local Bayes risk (within-block prefix, marginal law of z_k)", "nat"),
        real("local_stderr", "its standard error", "nat"),
        real("gateoff_risk", "R_gateoff: the Bayes risk of what the model with the gate off sees - its block's prefix, and for the first token of "
                             "a block the whole previous block (the logits at the last position of block k-1 predict it)", "nat"),
        real("gateoff_stderr", "its standard error", "nat"),
        real("gap", "R_gateoff - R_full, paired per sequence: the most a gate can gain", "nat"),
        real("gap_stderr", "its standard error", "nat"),
        real("unigram_entropy", "plug-in entropy of the held-out tokens after the first block (a no-context baseline)", "nat"),
        integer("heldout_tokens", "tokens scored: held-out sequences x (T - P)")}},
      {"runs.csv", "one training (q, size, gate mode, seed): its final held-out loss and gate",
       {real("q", "latent persistence q"), category("size", "model size", size_values), category("rho", "the gate", rho_values),
        index("seed", "seed index", 0), integer("trainer_seed", "the trainer's --seed (stream (seed, seed index); the same for every q, size and gate)"),
        integer("params", "trained parameters (total: embeddings, core, psi, unembedding; + rho when learned)"),
        integer("params_slow", "of which the slow path: psi's parameters (+ rho when learned)"),
        real("heldout_loss", "mean next-token log-loss over every held-out sequence, tokens P+1..T (1-based)", "nat"),
        real("bayes_risk", "R_full of the same tokens (hmm.csv)", "nat"), real("bayes_stderr", "its standard error", "nat"),
        real("gateoff_risk", "R_gateoff of the same tokens (hmm.csv): the floor of the gate-off model", "nat"),
        real("excess", "heldout_loss - bayes_risk", "nat"),
        real("unigram_entropy", "plug-in entropy of the same tokens", "nat"),
        real("trained_rho", "the gate rho after training (0 when off)"), real("abs_rho", "|trained_rho|"),
        real("injection_norm", "mean |rho psi(y)| over layers and the tokens of blocks 2.. of the first 256 held-out sequences (the gate's use, "
                               "free of the rho / psi scale confound F14)"),
        integer("tokens_seen", "training tokens: steps x batch x T")}},
      {"curves.csv", "one evaluation of one training: losses after `step` optimizer steps",
       {real("q", "latent persistence q"), category("size", "model size", size_values), category("rho", "the gate", rho_values),
        index("seed", "seed index", 0), integer("step", "optimizer steps done (0: before training)"),
        real("train_loss", "mean training objective over the steps since the previous row", "nat").may_be_empty("step 0: no step yet"),
        real("heldout_loss", "held-out loss (tokens P+1..T) over the first heldout_sequences held-out sequences", "nat"),
        integer("heldout_sequences", "held-out sequences evaluated (the trainer's first 256 before the last row, all of them at the last)")}},
      {"fits.csv", "one persistence q and gate mode: the scaling exponent over sizes, and the learned gate's gain at this q",
       {real("q", "latent persistence q"), category("rho", "the gate", rho_values),
        integer("points", "trainings in the fit (sizes x seeds with excess > 0)"),
        integer("dropped", "trainings left out because excess <= 0 (log undefined)"),
        real("alpha", "exponent alpha of log(excess) = c - alpha log(params), least squares over every (size, seed)")
            .may_be_empty("not computable: fewer than 2 sizes (or points) with excess > 0"),
        real("alpha_stderr", "its standard error").may_be_empty("fewer than 3 points"),
        real("alpha_lo", "95 % confidence interval, lower end: alpha - t_{0.975, points-2} x alpha_stderr").may_be_empty("fewer than 3 points"),
        real("alpha_hi", "upper end").may_be_empty("fewer than 3 points"),
        real("intercept", "c (log nats)").may_be_empty("alpha not computable"),
        real("gain", "mean over (size, seed) of loss(rho off) - loss(rho learned): the learned gate's gain at this q (the same on both rows of a q)", "nat")
            .may_be_empty("no pair: only one gate mode was trained"),
        real("gain_stderr", "its standard error over the pairs", "nat").may_be_empty("fewer than 2 pairs"),
        real("gain_halfwidth", "95 % half-width: t_{0.975, pairs-1} x gain_stderr", "nat").may_be_empty("fewer than 2 pairs"),
        integer("pairs", "(size, seed) pairs trained with both gate modes"),
        real("mean_heldout_loss", "mean held-out loss of this gate mode at this q", "nat"),
        real("mean_abs_rho", "mean |trained rho| over sizes and seeds"), real("sd_abs_rho", "its sample standard deviation").may_be_empty("one training"),
        real("mean_injection_norm", "mean injection norm over sizes and seeds"),
        real("sd_injection_norm", "its sample standard deviation").may_be_empty("one training")}}};
  o.summaries = {{"trainings", "trainings run: q values x sizes x gate modes x seeds"},
                 {"gain_iid", "gain loss(off) - loss(learn) at q = 1/2 (E1: ~0); empty: 0.5 not in q or one gate mode", "nat"},
                 {"gain_iid_halfwidth", "its 95 % half-width over (size, seed) pairs", "nat"},
                 {"gain_persistent", "the gain at the smallest q (E1: > 0)", "nat"},
                 {"gain_persistent_halfwidth", "its 95 % half-width", "nat"},
                 {"alpha_learn_iid", "scaling exponent alpha at q = 1/2, learned gate"},
                 {"alpha_learn_persistent", "scaling exponent alpha at the smallest q, learned gate"},
                 {"alpha_off_iid", "scaling exponent alpha at q = 1/2, gate off"},
                 {"alpha_off_persistent", "scaling exponent alpha at the smallest q, gate off"},
                 {"injection_norm_iid", "mean injection norm |rho psi(y)| at q = 1/2 (learned gate)"},
                 {"injection_norm_persistent", "mean injection norm at the smallest q (learned gate)"},
                 {"abs_rho_iid", "mean |trained rho| at q = 1/2"},
                 {"abs_rho_persistent", "mean |trained rho| at the smallest q"},
                 {"bayes_gap_persistent", "R_gateoff - R_full at the smallest q: the most a gate can gain there", "nat"}};
  o.figures = {{"e1.png", "(a) held-out loss curves per q at the largest size, gate learned vs off, with R_full and R_gateoff; (b) trained |rho| and "
                          "injection norm against q; (c) excess loss against parameters per q (log-log) with the fitted exponents"}};
  return o;
}

std::vector<ParamSpec> e1_params() {
  return {
      p_double_list("q", {0.5, 0.25, 0.1, 0.05, 0.01}, "latent persistence q per block, in (0, 1/2]: the chain redraws its state with probability 2q "
                                                       "(i.i.d. blocks at 1/2, second eigenvalue 1 - 2q)",
                    0.0, 0.5, true)
          .distinct_entries(),
      p_string("sizes", "s,m,l", "model sizes, comma-separated, each once: s, m, l (d = 16, 32, 64; depth 3)"),
      p_string("rho_modes", "learn,off", "gate modes, comma-separated, each once: learn (rho learned from 0), off (rho = 0)"),
      p_int("seeds", 2, "training seeds per (q, size, gate): seed index i uses the trainer seed drawn from stream (seed, i)", 1, 64),
      p_int("steps", 1000, "optimizer steps per training (AdamW, batch `batch`, warm-up then cosine)", 1, 1000000),
      p_int("batch", 32, "training sequences per step", 1, 4096),
      p_double("lr", 3e-3, "peak learning rate", 0.0, 1.0, true),
      p_int("states", 8, "latent states S of the block HMM", 2, 64),
      p_int("vocab", 32, "vocabulary V (categorical emissions)", 2, 1024),
      p_int("block", 8, "block length P (tokens per block; the model's block-local mask)", 1, 256),
      p_int("blocks", 8, "blocks per sequence K (T = K P tokens)", 2, 512),
      p_double("contrast", 1.0, "emission logits contrast x N(0, 1) per (state, symbol): smaller is harder (states harder to tell apart)", 0.0, 20.0,
               true),
      p_int("train_sequences", 8192, "training sequences per q (each step draws `batch` of them with replacement)", 1, 1000000),
      p_int("heldout_sequences", 1024, "held-out sequences per q (the trainer's final held-out loss and the Bayes risk)", 2, 1000000),
      p_int("data_seed", 0, "seed of the HMM's emissions and of the sampled sequences", 0, kMaxSeed),
      p_int("seed", 0, "seed of the trainer seeds (initial weights and minibatches)", 0, kMaxSeed),
      p_double("alpha_tolerance", 0.05, "the exponent check: |alpha(q_min) - alpha(1/2)| within this is 'no response'", 0.0, 10.0),
      p_int("jobs", 0, "trainings run at the same time, each one thread (0: the run's --threads)", 0, 256),
  };
}

ResourceEstimate e1_estimate(const Params& p) {
  check_e1_sizes(p);
  const double K = static_cast<double>(p.get_int("blocks")), P = static_cast<double>(p.get_int("block"));
  const double T = K * P, V = static_cast<double>(p.get_int("vocab"));
  const double steps = static_cast<double>(p.get_int("steps")), batch = static_cast<double>(p.get_int("batch"));
  const double Ntr = static_cast<double>(p.get_int("train_sequences")), Nho = static_cast<double>(p.get_int("heldout_sequences"));
  const double nq = static_cast<double>(p.get_double_list("q").size()), seeds = static_cast<double>(p.get_int("seeds"));
  double modes = 0.0;
  for (const std::string& r : kE1RhoModes) modes += p.get_string("rho_modes").find(r) != std::string::npos ? 1.0 : 0.0;
  double flops = 0.0, widest = 16.0;
  for (const std::string& s : kE1Sizes) {
    if (p.get_string("sizes").find(s) == std::string::npos) continue;
    const double d = e1_width(s);
    widest = std::max(widest, d);
    // Parameters (about): per layer 3 d^2 (Q, K, V) + 8 d^2 (MLP, d_ff = 4 d); psi 2 d^2; embeddings V d + P d;
    // unembedding V d. Work per token: 6 x parameters (forward and backward) plus attention within blocks.
    const double params = kE1Depth * 11.0 * d * d + 2.0 * d * d + (2.0 * V + P) * d;
    const double per_token = 6.0 * params + 6.0 * kE1Depth * P * d;
    const double evals = 11.0 * std::min(256.0, Nho) + Nho;
    flops += nq * modes * seeds * (steps * batch * T + evals * T / 3.0) * per_token;
  }
  // jobs = 0 runs one trainer per thread of the run, at most one per logical CPU.
  const double jobs = p.get_int("jobs") > 0 ? static_cast<double>(p.get_int("jobs")) : std::max(1.0, static_cast<double>(std::thread::hardware_concurrency()));
  // Each trainer: the Python interpreter with torch (~350 MB), its data, activations of a batch.
  const double per_job = 350e6 + 8.0 * (Ntr + Nho) * T * 3.0 + 4.0 * batch * T * widest * kE1Depth * 40.0;
  const double bytes = std::max(jobs, 1.0) * per_job + 8.0 * (Ntr + Nho) * T * 3.0;
  return {bytes, flops, "trainings (q x sizes x gates x seeds) of steps x batch x T tokens, 6 x parameters per token; about 350 MB per trainer"};
}

const ExperimentRegistration reg_coupling_e1{with_outputs(
    with_smoke(Experiment{"coupling-e1",
                          "Coupling paper E1 (§6): conditional scaling law - the hierarchical model (C1)-(C2) trained on block-HMM data at "
                          "several sizes and persistences q, gate learned vs off (PyTorch, python/tokdyn_train/e1.py)",
                          e1_params(), run_e1, "coupling-e1", e1_estimate},
               {{"q", "0.5,0.05"}, {"sizes", "s"}, {"seeds", "1"}, {"steps", "20"}, {"train_sequences", "64"}, {"heldout_sequences", "32"},
                {"blocks", "3"}, {"block", "4"}, {"states", "4"}, {"vocab", "8"}}),
    e1_outputs())};

}  // namespace preset_coupling_e1
}  // namespace tokdyn
