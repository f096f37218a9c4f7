// Mamba-2 configuration and the config.json reader (see models/mamba2/config.hpp). Standard
// library, nlohmann::json and tokdyn's strict JSON helpers only (fuzzed standalone).
#include "tokdyn/models/mamba2/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/json_strict.hpp"

namespace tokdyn::mamba2 {

namespace {

using json = nlohmann::json;

[[noreturn]] void config_fail(const std::string& what, const std::string& text) {
  throw InputError(json_strict::one_line(what + ": " + text));
}


}  // namespace

// ---------------------------------------------------------------- Config

int Config::vocab_padded() const {
  const long m = std::max(1, pad_vocab_multiple);
  return static_cast<int>((vocab_size + m - 1) / m * m);
}

void Config::validate(const std::string& what) const {
  auto need = [&](bool ok, const std::string& msg) {
    if (!ok) config_fail(what, "inconsistent config: " + msg);
  };
  auto range = [&](const char* name, long v, long lo, long hi) {
    need(v >= lo && v <= hi,
         "expected " + std::to_string(lo) + " <= " + name + " <= " + std::to_string(hi) + ", got " + std::to_string(v));
  };
  range("d_model", d_model, 1, 1 << 16);
  range("n_layer", n_layer, 1, 4096);
  range("vocab_size", vocab_size, 1, 1 << 24);
  range("pad_vocab_size_multiple", pad_vocab_multiple, 1, 1 << 16);
  range("d_state", d_state, 1, 1 << 14);
  range("d_conv", d_conv, 1, 64);
  range("expand", expand, 1, 16);
  range("headdim", headdim, 1, 1 << 16);
  range("ngroups", ngroups, 1, 1 << 16);
  need(d_inner() % headdim == 0, "expected d_inner = expand * d_model = " + std::to_string(d_inner()) +
                                     " to be a multiple of headdim = " + std::to_string(headdim));
  need(nheads() % ngroups == 0, "expected nheads = d_inner / headdim = " + std::to_string(nheads()) +
                                    " to be a multiple of ngroups = " + std::to_string(ngroups));
  need(d_inner() % ngroups == 0,
       "expected d_inner = " + std::to_string(d_inner()) + " to be a multiple of ngroups = " + std::to_string(ngroups));
  // conv_dim and d_in_proj are ints: 2 * ngroups * d_state must stay far from overflow.
  need(static_cast<long long>(ngroups) * d_state <= (1 << 24),
       "expected ngroups * d_state <= 16777216, got " + std::to_string(static_cast<long long>(ngroups) * d_state));
  need(std::isfinite(eps) && eps > 0, "expected a norm epsilon > 0, got " + json_strict::number_text(eps));
}

json Config::to_json() const {
  json ssm = {{"layer", "Mamba2"}};
  const Config def;
  if (d_state != def.d_state) ssm["d_state"] = d_state;
  if (d_conv != def.d_conv) ssm["d_conv"] = d_conv;
  if (expand != def.expand) ssm["expand"] = expand;
  if (headdim != def.headdim) ssm["headdim"] = headdim;
  if (ngroups != def.ngroups) ssm["ngroups"] = ngroups;
  return json{{"d_model", d_model},
              {"d_intermediate", 0},
              {"n_layer", n_layer},
              {"vocab_size", vocab_size},
              {"ssm_cfg", ssm},
              {"attn_layer_idx", json::array()},
              {"attn_cfg", json::object()},
              {"rms_norm", true},
              {"residual_in_fp32", true},
              {"fused_add_norm", true},
              {"pad_vocab_size_multiple", pad_vocab_multiple},
              {"tie_embeddings", tie_embeddings}};
}

std::vector<std::string> Config::sizes() { return {"tiny", "small", "130m", "370m", "780m", "1.3b", "2.7b"}; }

Config Config::named(const std::string& size) {
  Config c;
  if (size == "tiny") {
    c.d_model = 64;
    c.n_layer = 4;
    c.vocab_size = 1000;
    c.d_state = 16;
    c.headdim = 16;
  } else if (size == "small") {  // tokdyn train's small Mamba-2 (python/tokdyn_train), as the decoders' small
    c.d_model = 256;
    c.n_layer = 4;
    c.vocab_size = 4096;
    c.d_state = 32;
    c.headdim = 32;
  } else if (size == "130m") {
    c.d_model = 768, c.n_layer = 24;
  } else if (size == "370m") {
    c.d_model = 1024, c.n_layer = 48;
  } else if (size == "780m") {
    c.d_model = 1536, c.n_layer = 48;
  } else if (size == "1.3b") {
    c.d_model = 2048, c.n_layer = 48;
  } else if (size == "2.7b") {
    c.d_model = 2560, c.n_layer = 64;
  } else {
    throw std::invalid_argument("mamba2 size '" + json_strict::one_line(size) +
                                "': expected one of tiny, small, 130m, 370m, 780m, 1.3b, 2.7b");
  }
  c.vocab_rule = "tokdyn's '" + size + "' configuration: vocab_size " + std::to_string(c.vocab_size) + " (embedding " +
                 std::to_string(c.vocab_padded()) + " rows)";
  return c;
}

}  // namespace tokdyn::mamba2
