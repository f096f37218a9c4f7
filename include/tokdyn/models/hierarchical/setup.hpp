#pragma once
// The hierarchical model's slow path (C2) from validated Params: one way from the knobs the model
// registry declares for model hierarchical (src/models/hierarchical/descriptor.cpp) to a
// hier::SlowPath, for the descriptor and for every preset that builds the slow path itself
// (coupling-gate-intervention), so that the knobs mean the same everywhere.
#include "tokdyn/models/hierarchical/hierarchical.hpp"
#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn::hier {

/// The slow path of knobs block, compression, topk, injection, psi_hidden, psi_scale, refresh_every,
/// refresh, pooled, slow_loop, site and seed (psi's draws) on tokens of dimension d, with gate `rho`.
/// A multi-level compression (compression = multi) comes without its levels: the caller adds them.
/// InputError when block is longer than the sequence (knob tokens).
SlowPath slow_path_from(const Params& p, int d, double rho);

}  // namespace tokdyn::hier
