// libFuzzer target for the safetensors header parser: the input is a whole file. parse_header may
// reject it with InputError; any other exception, crash or sanitizer report is a bug. When the input
// is accepted, the parsed header must describe a well-formed file. Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <set>
#include <string>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/safetensors.hpp"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "invariant violated: %s\n", what);
  std::abort();
}

void check(const tokdyn::st::Header& h, std::size_t size) {
  if (h.data_start != 8 + h.header_len) bug("data_start != 8 + header_len");
  if (h.header_len > 100'000'000) bug("header_len above the maximum");
  if (h.data_start > size) bug("header extends past the file");
  const std::uint64_t data_size = size - h.data_start;
  std::uint64_t pos = 0;
  std::set<std::string> names;
  for (const auto& t : h.tensors) {
    if (!names.insert(t.name).second) bug("duplicate tensor name");
    if (t.name == "__metadata__") bug("__metadata__ parsed as a tensor");
    if (t.begin != pos) bug("tensors not contiguous");
    if (t.end < t.begin) bug("end < begin");
    if (t.end > data_size) bug("tensor past the end of the file");
    const unsigned bits = tokdyn::st::dtype_bits(t.dtype_name);
    if (bits == 0) bug("unknown dtype accepted");
    // Recompute numel * bits with overflow checks; it must match the byte range exactly.
    std::uint64_t n = 1;
    bool zero = false, overflow = false;
    for (auto d : t.shape) zero = zero || d == 0;
    if (!zero)
      for (auto d : t.shape) {
        if (__builtin_mul_overflow(n, d, &n)) overflow = true;
      }
    else
      n = 0;
    std::uint64_t total_bits = 0;
    if (overflow || __builtin_mul_overflow(n, static_cast<std::uint64_t>(bits), &total_bits)) bug("size overflow accepted");
    if (total_bits % 8 != 0 || total_bits / 8 != t.end - t.begin) bug("byte size != numel * dtype size");
    if (t.numel() != n) bug("numel() disagrees");
    if (h.find(t.name) != &t) bug("find() does not return the tensor");
    pos = t.end;
  }
  if (pos != data_size) bug("data does not end at the end of the file");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const tokdyn::st::Header h = tokdyn::st::parse_header(data, size, size, "fuzz-input");
    check(h, size);
  } catch (const tokdyn::InputError& e) {
    const std::string msg = e.what();
    if (msg.rfind("fuzz-input: ", 0) != 0) bug("message does not start with the file name");
    if (msg.find('\n') != std::string::npos) bug("message has a newline");
    if (msg.find("; expected ") == std::string::npos) bug("message does not say what was expected");
  }
  return 0;
}
