#pragma once
// coupling-e1 (coupling_e1.cpp, the preset) and its data, fits and trainer results
// (coupling_e1_data.cpp): the random streams, sizes, the records of one q and one training, and
// the helpers the run uses.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tokdyn/analysis/block_hmm.hpp"
#include "tokdyn/core/constants.hpp"
#include "tokdyn/runtime/child_jobs.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn {
namespace preset_coupling_e1 {

namespace fs = std::filesystem;
using hmm::BlockHmm;
using hmm::Matrix;
using hmm::Summary;
using hmm::Vector;

// Random streams, named by what they draw.
constexpr std::uint64_t kE1Emission = 0xe1e0;   ///< (data_seed, {kE1Emission}): the emission logits
constexpr std::uint64_t kE1Train = 0xe1a0;      ///< (data_seed, {kE1Train, n}): training sequence n
constexpr std::uint64_t kE1Heldout = 0xe1b0;    ///< (data_seed, {kE1Heldout, n}): held-out sequence n
constexpr std::uint64_t kE1TrainerSeed = 0xe1c0;  ///< (seed, {kE1TrainerSeed, i}): the trainer's --seed of seed index i

inline const std::vector<std::string> kE1Sizes = {"s", "m", "l"};
inline const std::vector<std::string> kE1RhoModes = {"learn", "off"};
/// The trainer's model widths (tokdyn_train.hierarchical.SIZES), for the estimate only.
inline int e1_width(const std::string& size) { return size == "s" ? 16 : size == "m" ? 32 : 64; }
constexpr int kE1Depth = 3;


/// One q's data: the files the trainer reads and the references computed on the held-out file.
struct E1Data {
  double q = 0.0;
  std::string tag;                 ///< "q<value>" in file names
  fs::path train_file, heldout_file;
  hmm::Estimate bayes, local, gateoff, gap;  ///< R_full, R_local, R_gateoff, R_gateoff - R_full (paired) over held-out sequences
  double unigram_entropy = 0.0;    ///< plug-in entropy of the held-out tokens after the first block
  double iid_max_diff = kNaN;      ///< max per-sequence |R_full - R_local| (computed at q = 1/2)
  double stream_max_diff = 0.0;    ///< max |risk from the file - risk from hmm::monte_carlo_losses| (Full and Local)
  long heldout_tokens = 0;
};

/// One training: what it is, and what it gave.
struct E1Training {
  std::size_t qi = 0;
  std::string size, rho;
  int seed_index = 0;
  std::uint64_t trainer_seed = 0;
  fs::path dir;
  // results (result.json, loss.csv)
  double heldout = kNaN, trained_rho = kNaN, injection = kNaN, unigram = kNaN, seconds = kNaN;
  long params = 0, params_slow = 0, tokens_seen = 0;
  struct Row {
    long step = 0;
    double train_loss = kNaN, heldout = kNaN;
    long sequences = 0;
  };
  std::vector<Row> curve;
  std::string id() const { return fmt::format("q{}_{}_{}_seed{}", qi, size, rho, seed_index); }
};

/// Least-squares fit of log(excess) = c - alpha log(params) over the points with excess > 0.
struct E1Fit {
  int points = 0, dropped = 0;
  double alpha = kNaN, se = kNaN, lo = kNaN, hi = kNaN, c = kNaN;
};

/// A comma-separated list of choices (each once, at least one), in the order of `allowed`.
std::vector<std::string> e1_choice_list(const Params& p, const std::string& key, const std::vector<std::string>& allowed);

/// 0.975 quantile of Student's t with `df` degrees of freedom (NaN for df < 1).
double e1_t975(double df);

/// The symmetric chain with persistence q in the "redraw" form: Q = (1 - 2q) I + 2q 11^T / S.
BlockHmm e1_hmm(const hmm::Emission& e, int S, int P, double q);

/// Sequences 0..N-1 of stream tag `stream` as token ids [N, T] in C order (int64).
std::vector<std::int64_t> e1_sample_ids(const BlockHmm& m, int K, long N, std::uint64_t data_seed, std::uint64_t stream);

/// Per-sequence risks over blocks 2..K (first_block = 1, 0-based) of the sequences in `ids` [N, T]:
/// column 0 R_full (hmm::sequence_risk Full: exact filtering over every previous block), column 1
/// R_local (hmm::sequence_risk Local: the within-block prefix and the marginal law of z_k), column 2
/// R_gateoff, the Bayes risk of what the model with the gate off sees: its logits at position t
/// predict token t + 1 from block-local attention, so the first token of block k is predicted from
/// the whole block k - 1 (hmm::token_losses under the PrevBlock priors) and every other token from
/// its own block's prefix (under the Local priors).
Matrix e1_sequence_risks(const BlockHmm& m, const std::vector<std::int64_t>& ids, long N, long T);

E1Fit e1_fit(const std::vector<double>& params, const std::vector<double>& excess);

/// Mean and standard error of values (se NaN below 2 values).
hmm::Estimate e1_mean_se(const std::vector<double>& v);

double e1_sd(const std::vector<double>& v);

/// Reads DIR/result.json and DIR/loss.csv of a finished training (a malformed file is a bug of
/// the trainer or of this reader: std::logic_error).
void e1_read_results(E1Training& t);

/// The error of a failed training (exit status != 0 or a signal).
[[noreturn]] void e1_failed(const E1Training& t, const E1Data& d, const ChildExit& ex);

}  // namespace preset_coupling_e1
}  // namespace tokdyn
