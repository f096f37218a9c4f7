// libFuzzer target for the Mamba-2 config.json reader: the input is the file's bytes.
// parse_config_text may reject it with InputError; any other exception, crash or sanitizer report
// is a bug. An accepted config must validate, and its state-spaces rendering (to_json) must parse
// back to the same model. Built by scripts/fuzz.sh.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokdyn/core/error.hpp"
#include "tokdyn/models/mamba2/config.hpp"
#include "tokdyn/models/mamba2/config_json.hpp"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using tokdyn::mamba2::Config;
  Config c;
  try {
    c = tokdyn::mamba2::parse_config_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input");
  } catch (const tokdyn::InputError& e) {
    const std::string msg = e.what();
    if (msg.rfind("fuzz-input: ", 0) != 0) bug("message does not start with the file name");
    if (msg.find('\n') != std::string::npos) bug("message has a newline");
    if (msg.find("expected") == std::string::npos) bug("message does not say what was expected");
    return 0;
  }
  try {
    c.validate("accepted");
  } catch (const tokdyn::InputError&) {
    bug("an accepted config does not validate");
  }
  if (!std::isfinite(c.eps) || c.eps <= 0) bug("non-finite or non-positive epsilon accepted");
  if (c.vocab_padded() < c.vocab_size || c.vocab_padded() % c.pad_vocab_multiple != 0) bug("padded vocabulary wrong");
  if (c.d_in_proj() <= 0 || c.conv_dim() <= 0 || c.nheads() <= 0) bug("non-positive derived size");
  if (c.format != "state-spaces" && c.format != "hf") bug("unknown format");
  if (c.vocab_rule.empty()) bug("no vocabulary rule recorded");
  Config r;
  try {
    r = tokdyn::mamba2::parse_config_text(c.to_json().dump(), "round-trip");
  } catch (const tokdyn::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    bug("to_json of an accepted config is refused");
  }
  if (r.d_model != c.d_model || r.n_layer != c.n_layer || r.vocab_size != c.vocab_size ||
      r.pad_vocab_multiple != c.pad_vocab_multiple || r.d_state != c.d_state || r.d_conv != c.d_conv ||
      r.expand != c.expand || r.headdim != c.headdim || r.ngroups != c.ngroups || r.tie_embeddings != c.tie_embeddings)
    bug("to_json does not round-trip");
  if (c.format == "state-spaces" && r.eps != c.eps) bug("epsilon changed in the round trip");
  return 0;
}
