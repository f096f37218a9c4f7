#pragma once
// The persistency-of-excitation tables of The Attention Within §VI-B (analysis/pe_window.hpp
// PeObserver: q.csv, pe.csv, pe_curve.csv, pe_summary.csv), declared once (outputs.hpp) for every
// preset that writes them (ssm-random-silu, mamba2-fig4, -fig5, -fig6). Each preset lists its own
// variants in the `variant` column (output_tables.hpp variant_column). Tokens count from 1 (the
// paper's q_1 is the first token; parameter fig_token), runs from 0, layers from 1.
#include <string>
#include <vector>

#include "tokdyn/experiments/output_tables.hpp"
#include "tokdyn/io/outputs.hpp"

namespace tokdyn {

/// q.csv, pe.csv, pe_curve.csv, pe_summary.csv (PeObserver, written through write_tables).
inline std::vector<TableDecl> pe_tables(const ColumnDecl& variant) {
  const std::string none = "no admissible window: W(T) <= 0 for every T up to the depth (T* is 'none')";
  return {
      {"q.csv", "one token at one layer of run fig_run: the interaction term q_i(t) of §VI-B",
       {variant, index("run", "run (= fig_run)", 0), index("token", "token i", 1),
        index("layer", "layer t (q of the state entering layer t)", 1),
        real("q", "interaction term q_i(t) = C_i . B_i as the layer uses them")}},
      {"pe.csv", "one token of one run: its smallest admissible window T* of eq. (23)",
       {variant, index("run", "run", 0), index("token", "token i", 1),
        integer("T_star", "smallest T with W(T) > 0, W(T) = min over windows of length T of the mean of q_i (layers)").may_be_empty(none)}},
      {"pe_curve.csv", "one token and one window length: the worst-case window average, envelope over runs",
       {variant, index("token", "token i", 1), integer("T", "window length (layers)"),
        real("worst_window_avg", "min over runs of W(T) = min over windows of length T of the mean of q_i")}},
      {"pe_summary.csv", "one reading of T* over the runs and tokens (the paper does not say which it uses)",
       {variant,
        category("reading", "how T* is taken over runs and tokens",
                 {{"text", "largest T* over all tokens and runs (none if any has none)"},
                  {"caption", "largest T* over runs of the first token"},
                  {"envelope", "smallest T with min over tokens and runs of W(T) > 0"},
                  {"envelope_first_token", "smallest T with min over runs of W(T) of the first token > 0"}}),
        integer("T_star", "T* under that reading (layers)").may_be_empty(none),
        index("run", "the run attaining it", 0).may_be_empty("not a single run (envelope readings)"),
        index("token", "the token attaining it", 1).may_be_empty("not a single token (envelope over all tokens)")}}};
}

}  // namespace tokdyn
