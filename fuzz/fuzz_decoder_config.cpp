// libFuzzer target for the decoder families' config.json readers (GPT-2, GPT-NeoX, Llama): the
// first byte picks the family, the rest is the file's bytes. parse_config_text may reject it with
// InputError; any other exception, crash or sanitizer report is a bug. An accepted config must
// validate, have a finite positive size and, read again from the text it was read from, give the
// same architecture. Built by scripts/fuzz.sh.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tokdyn/core/error.hpp"
#include "tokdyn/models/decoder/checkpoint.hpp"
#include "tokdyn/models/decoder/decoder.hpp"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tokdyn::decoder;
  const std::vector<const Family*> fams = families();
  if (fams.empty()) bug("no decoder family registered");
  if (size == 0) return 0;
  const Family& f = *fams[data[0] % fams.size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  Arch a;
  try {
    a = parse_config_text(f, text, "fuzz-input");
  } catch (const tokdyn::InputError& e) {
    const std::string msg = e.what();
    if (msg.rfind("fuzz-input", 0) != 0) bug("message does not start with the file name");
    if (msg.find('\n') != std::string::npos) bug("message has a newline");
    if (msg.find("expected") == std::string::npos) bug("message does not say what was expected");
    return 0;
  }
  try {
    a.validate();
  } catch (const std::invalid_argument&) {
    bug("an accepted config does not validate");
  }
  const double p = a.parameters();
  if (!std::isfinite(p) || p <= 0) bug("non-finite or non-positive parameter count");
  if (a.family != f.name) bug("family name not recorded");
  if (a.n_head % a.n_kv_head != 0) bug("heads not a multiple of key-value heads");
  if (a.positions == Positions::Rotary) {
    const std::vector<double> fr = a.frequencies();
    if (static_cast<int>(2 * fr.size()) != a.rotary_dims) bug("rotary frequencies do not cover the rotary dimensions");
    for (double x : fr)
      if (!std::isfinite(x) || x <= 0) bug("a non-finite or non-positive rotary frequency");
  }
  Arch b;
  try {
    b = parse_config_text(f, a.config.dump(), "round-trip");
  } catch (const tokdyn::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    bug("the accepted config, dumped, is refused");
  }
  if (b.d_model != a.d_model || b.n_layer != a.n_layer || b.n_head != a.n_head || b.n_kv_head != a.n_kv_head ||
      b.head_dim != a.head_dim || b.d_ff != a.d_ff || b.vocab_size != a.vocab_size || b.rotary_dims != a.rotary_dims ||
      b.layout != a.layout || b.tied_embeddings != a.tied_embeddings)
    bug("the config does not read the same twice");
  return 0;
}
