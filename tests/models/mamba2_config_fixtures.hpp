#pragma once
// Shared by test_mamba2_checkpoint.cpp and test_mamba2_block.cpp: a small Mamba-2 config
// (d_model 24, 3 layers, d_state 8, headdim 8).
#include "tokdyn/models/mamba2/config.hpp"

namespace tokdyn::testing {

inline mamba2::Config small_config(int ngroups = 1) {
  mamba2::Config c;
  c.d_model = 24;
  c.n_layer = 3;
  c.vocab_size = 100;
  c.d_state = 8;
  c.headdim = 8;
  c.ngroups = ngroups;
  return c;
}

}  // namespace tokdyn::testing
