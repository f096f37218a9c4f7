#pragma once
// The numbers The Attention Within (§VI, Figs. 1-6) reports, as rows of a preset's checks.csv
// (experiments/checks.hpp). The paper reads its values off figures ("lambda_bar_1 rises to ~0.8"),
// so each row compares against the paper's value with a band: the engineering spec's bands
// (specs/ssm-consensus.md, T29-T34), written beside each row. Every figure is at the paper's
// depth kappa = 200 and 50 runs of 50 tokens; a run shorter than 200 layers gets "n/a" rows
// naming why, and so does a trained-weights figure run without a trained checkpoint.
// Used by ssm-random-silu (the paper's SSM model with random weights: Figs. 3, 5, 6) and the
// mamba2-fig1..6 presets (the real block).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tokdyn/analysis/pe_window.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/engine/observers.hpp"

namespace tokdyn::attention_within {

inline constexpr long kPaperDepth = 200;  ///< kappa of every figure of §VI (N5)

/// The paper's reported values of Fig. `fig` (1-6), for the figures (manifest notes.paper_values):
/// {variant: {"lambda1", "r"}} for Figs. 1-3, {"t_star"} for Figs. 4-5, {config: T* or null} for Fig. 6.
nlohmann::json paper_values(int fig);

/// Run-mean of lambda_bar_1 (or r when `participation`) at layer `layer` (the observation whose
/// time is `layer`); NaN when the run did not reach it.
double run_mean_at(const GramObserver& g, long layer, bool participation);
/// Mean over layers [from, to] of the run-mean; NaN when the run did not reach `to`.
double run_mean_over(const GramObserver& g, long from, long to, bool participation);

/// Why the paper's values do not apply to a run ("" when they do): a run shorter than the
/// paper's 200 layers; `trained` figures also need trained weights (`trained_weights`).
std::string not_applicable_reason(long depth, bool trained, bool trained_weights);

/// Fig. 1 (trained blocks cycled, SiLU on): plateau values with and without the output gate
/// (N7-N10, T29), their ordering, and both plateaus. Either observer may be null (variant not run).
/// `why_na` makes the rows that compare with the paper's numbers n/a; `why_qualitative` (default:
/// the same) the rows of its qualitative claims (plateaus, the gate's ordering, sign changes,
/// "essentially unchanged"), which hold or fail on any trained model, not only on mamba2-130m.
void fig1_checks(CheckTable& t, const GramObserver* no_gate, const GramObserver* gate, const std::string& why_na,
                 const std::optional<std::string>& why_qualitative = std::nullopt);
/// Fig. 2 (one trained block repeated, gate off): lambda_bar_1 > 0.95 from layer 10 on, r ~ 1.05 (N11-N12, T30).
void fig2_checks(CheckTable& t, const GramObserver& no_gate, const std::string& why_na);
/// Fig. 3 (random weights redrawn per layer, gate off): values at layer 200 with and without SiLU
/// (N13-N16, T31), r still rising without SiLU, and SiLU clustering more.
void fig3_checks(CheckTable& t, const GramObserver* silu, const GramObserver* no_silu, const std::string& why_na);
/// Figs. 4-5: the paper's T* of (23) (Fig. 4: 8, Fig. 5: 34 with `random_blocks`) is that of the
/// first token of a run it does not identify, so it must lie within [min, max] over our runs of
/// token `token`'s T*; and (Fig. 4) q of token `token` of run `run` changes sign.
void fig45_checks(CheckTable& t, const QRecord& q, int run, int token, bool random_blocks, const std::string& why_na,
                  const std::optional<std::string>& why_qualitative = std::nullopt);
/// Fig. 6: the text's reading of T* (largest over tokens and runs) for one configuration
/// ("mamba2_silu", "mamba2_no_silu", "random_silu", "random_no_silu"); the last has none: its
/// envelope W(T) stays <= 0. `mamba2_silu_t_star` (0: unknown) anchors "mamba2 no SiLU within 5 of it".
void fig6_checks(CheckTable& t, const std::string& config, const QRecord& q, int mamba2_silu_t_star, const std::string& why_na,
                 const std::optional<std::string>& why_qualitative = std::nullopt);

}  // namespace tokdyn::attention_within
