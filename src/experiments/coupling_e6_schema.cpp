// coupling-e6's parameters and declared outputs (coupling_e6_schema.hpp).
#include "coupling_e6_schema.hpp"

#include <string>
#include <vector>

#include "tokdyn/core/constants.hpp"
#include "tokdyn/experiments/checks.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn {
namespace coupling_e6 {

std::vector<ParamSpec> e6_params() {
  return {
      p_string("checkpoint", "", "a `tokdyn train` results folder (checkpoints/step-N) or one checkpoint folder; empty: a tiny gpt2 trained in the "
               "run on a synthetic Markov chain (smoke_steps, smoke_every)").directory(),
      p_int_list("steps", {}, "checkpoint steps to analyse (empty: every checkpoint of the folder)", 0, 1e12).increasing(),
      p_string("corpus", "", "text file whose first batch x context tokens (the checkpoint's tokenizer.json) are the loss batch; required "
               "with a checkpoint").file().when_not("checkpoint", {""}),
      p_int("batch", 4, "rows of the loss batch (each row a window of context tokens)", 1, 512),
      p_int("context", 33, "tokens per row of the loss batch (context - 1 next-token predictions)", 2, 4096),
      p_int("tokens", 8, "tokens of the fixed input whose cocycle A(l) is taken (the first row's first tokens); state dim tokens x d", 1, 64),
      p_int("k", 6, "top curvature eigenpairs (largest algebraic)", 1, 20),
      p_int("random", 6, "random unit directions in weight space (the baseline)", 2, 64),
      p_string("curvature", "hessian", "the curvature: Hessian of the loss, or the Gauss-Newton matrix J^T H_out J", {"hessian", "gauss-newton"}),
      p_string("delta", "total", "dA(l): total (x_l moves with W: the spec's convention) or direct (x_l held)", {"total", "direct"}),
      p_int("first", 0, "first layer of the depth window", 0, 4096),
      p_int("last", -1, "one past the last layer of the window (-1: the model's depth)", -1, 4096),
      p_double("lanczos_tol", 1e-10, "Lanczos stops when every top-k Ritz residual estimate is below lanczos_tol |lambda_1|", 1e-14, 1e-2),
      p_int("lanczos_max", 0, "most Lanczos steps (0: 8k + 100)", 0, 5000),
      p_string("quotient", "auto", "auto: the cocycle on the quotient by each token's constant direction when every A(l) annihilates them "
               "(LayerNorm, F19); none: on R^(tokens d)", {"auto", "none"}),
      p_double("growth_scale", 1.0, "the dichotomy is taken at this growth scale: of gamma^-1 (I + A(l)) (1: the paper's (A4); "
               "the same gamma at every step)", 0.01, 100.0, true),
      p_double("unit_margin", 1e-6, "an end map with an eigenvalue | |lambda| - 1 | <= unit_margin: no dichotomy (undecided)", 1e-12, 0.5),
      p_double("max_projector_norm", 10.0, "a dichotomy whose projectors have max ||P_+(l)||_2 above this (bundles within ~1/value "
               "rad of each other) is ill-conditioned: its step is undecided", 1.0, 1e12),
      p_double("proj_tol", 1e-8, "tolerance of the projector checks (P^2 = P, P_+ + P_- = I, invariance)", 1e-15, 1.0),
      p_int("seed", 0, "seed of the Lanczos start, the random directions and the smoke model", 0, kMaxSeed),
      p_int("smoke_steps", 40, "training steps of the in-run tiny gpt2 (checkpoint empty)", 1, 100000).when("checkpoint", {""}),
      p_int("smoke_every", 20, "checkpoint every N steps of the in-run training (and steps 0 and the last)", 1, 100000).when("checkpoint", {""}),
  };
}

OutputDecl e6_outputs() {
  OutputDecl o;
  const auto frac_col = [](const char* name, const char* what) {
    return real(name, what).may_be_empty("undecided: no dichotomy at this step");
  };
  o.tables = {
      checks_table(),
      {"eigen.csv", "one direction in weight space at one checkpoint step: a top-k curvature eigenvector or a random unit direction, and the "
                    "slow / fast split of its generator perturbation dA(l) over the depth window",
       {integer("step", "training step of the checkpoint"),
        category("direction", "which direction", {{"top", "a top-k eigenvector of the curvature (Lanczos)"}, {"random", "a seeded Gaussian unit direction (baseline)"}}),
        index("index", "rank among the top-k (0: the largest eigenvalue), or the random direction's number", 0),
        real("curvature", "eigenvalue (top) or Rayleigh quotient v^T H v (random)"),
        real("residual", "|H v - lambda v| / |lambda_1| of the Ritz pair").may_be_empty("a random direction"),
        category("dichotomy", "whether the step's cocycle has a usable dichotomy", {{"found", "two-sided bundles exist, max ||P_+|| <= max_projector_norm"}, {"undecided", "none, or an ill-conditioned one: see fractions.csv why"}}),
        frac_col("slow_fraction", "sum_l |P_+(l+1) dA(l) P_+(l)|_F^2 / sum_l |dA(l)|_F^2 (persistent block: slow-mode)"),
        frac_col("fast_fraction", "sum_l |P_-(l+1) dA(l) P_-(l)|_F^2 / sum_l |dA(l)|_F^2 (decaying block)"),
        frac_col("cross_plus_minus", "sum_l |P_+(l+1) dA(l) P_-(l)|_F^2 / sum_l |dA(l)|_F^2 (skew block)"),
        frac_col("cross_minus_plus", "sum_l |P_-(l+1) dA(l) P_+(l)|_F^2 / sum_l |dA(l)|_F^2 (skew block)"),
        frac_col("fast_range_fraction", "sum_l |P_-(l+1) dA(l)|_F^2 / sum_l |dA(l)|_F^2 (the paper's fast-mode: range in the decaying bundle)"),
        frac_col("block_sum", "sum of the four block fractions (1 for orthogonal projectors; oblique ones differ)"),
        frac_col("slow_share", "the persistent block's share of the four blocks' sum: slow_fraction / block_sum, in [0, 1]"),
        frac_col("fast_share", "the decaying block's share: fast_fraction / block_sum"),
        real("neutral_fraction", "1 - sum_l |Q^T dA Q|_F^2 / sum_l |dA|_F^2: the part along LayerNorm's neutral directions, dropped by the quotient (0 without)"),
        real("norm_dA", "sqrt(sum_l |dA(l)|_F^2) for the unit direction v, on R^(tokens d)")}},
      {"fractions.csv", "one checkpoint step: the loss, the dichotomy, and the mean fractions of the top-k and of the random directions",
       {integer("step", "training step of the checkpoint"), real("loss", "the loss batch's mean next-token cross-entropy", "nats/token"),
        category("dichotomy", "whether the step's cocycle has a usable dichotomy", {{"found", "two-sided bundles exist, max ||P_+|| <= max_projector_norm"}, {"undecided", "none, or an ill-conditioned one (why)"}}),
        text("why", "why there is no usable dichotomy").may_be_empty("there is one"),
        integer("k_plus", "dim V_par: the persistent bundle's dimension").may_be_empty("no two-sided bundles"),
        integer("dim", "the cocycle's state dimension (tokens (d - 1) on the quotient, tokens d without)"),
        real("end_margin", "min over the end maps B(first), B(last-1) of | |lambda| - 1 | (their distance from the unit circle)").may_be_empty("not computable (eigensolver)"),
        real("lambda_max", "the largest curvature eigenvalue"), real("lambda_k", "the k-th largest"),
        frac_col("slow_top_mean", "mean slow fraction of the top-k"), frac_col("slow_top_sd", "its sample standard deviation"),
        frac_col("slow_random_mean", "mean slow fraction of the random directions"), frac_col("slow_random_sd", "its sample standard deviation"),
        frac_col("fast_top_mean", "mean fast (decaying block) fraction of the top-k"), frac_col("fast_random_mean", "the same, random directions"),
        frac_col("fast_range_top_mean", "mean fast-range fraction (P_- dA) of the top-k"), frac_col("fast_range_random_mean", "the same, random directions"),
        frac_col("slow_share_top_mean", "mean slow share (of the four blocks' sum) of the top-k"), frac_col("slow_share_random_mean", "the same, random directions"),
        integer("lanczos_iterations", "Lanczos steps (curvature products) taken"),
        flag("lanczos_converged", "every top-k Ritz estimate fell below lanczos_tol |lambda_1|")}},
      {"projectors.csv", "one fibre (depth) of the window at one step with two-sided bundles (ill-conditioned ones too): the projector P_+ and its residuals (no rows when no step has any)",
       {integer("step", "training step"), index("layer", "depth of the fibre (first .. last)", 0), real("p_plus_norm", "||P_+||_2 (1 for an orthogonal projector)"),
        real("idempotence", "||P_+^2 - P_+|| / ||P_+||"),
        real("invariance", "||P_+(l+1) B(l) - B(l) P_+(l)|| / (||B|| ||P_+||)").may_be_empty("the last fibre (no layer after it)")}}};
  o.summaries = {{"steps", "checkpoint steps analysed"},
                 {"steps_with_dichotomy", "steps whose cocycle has a dichotomy (two-sided bundles)"},
                 {"slow_top_last", "mean slow fraction of the top-k at the last step", "", "the last step has a dichotomy"},
                 {"slow_random_last", "mean slow fraction of the random directions at the last step", "", "the last step has a dichotomy"}};
  o.figures = {{"e6.png", "slow fraction over training steps (top-k against the random baseline, with their spread), the fast-range fraction, "
                          "and the curvature spectrum per step"}};
  return o;
}

}  // namespace coupling_e6
}  // namespace tokdyn
