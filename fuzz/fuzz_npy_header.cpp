// libFuzzer target for the .npy reader: the input is a whole file. parse_header may reject it with
// InputError; any other exception, crash or sanitizer report is a bug. When the header is
// accepted, it must describe the file exactly, and decoding an integer array must give count
// values in C order (checked against an independent Fortran-to-C index computation).
// Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/npy.hpp"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "invariant violated: %s\n", what);
  std::abort();
}

void check_message(const tokdyn::InputError& e) {
  const std::string msg = e.what();
  if (msg.rfind("fuzz-input: ", 0) != 0) bug("message does not start with the file name");
  if (msg.find('\n') != std::string::npos) bug("message has a newline");
  if (msg.find("expected ") == std::string::npos) bug("message does not say what was expected");
  for (unsigned char c : msg)
    if (c < 0x20 || c >= 0x7f) bug("message has a control or non-ASCII byte");
}

void check(const tokdyn::npy::Header& h, const std::uint8_t* data, std::size_t size) {
  const std::uint64_t pre = h.major == 1 ? 10 : 12;
  if (h.major < 1 || h.major > 3 || h.minor != 0) bug("unsupported version accepted");
  if (h.data_offset < pre || h.data_offset - pre > tokdyn::npy::kMaxHeaderLen) bug("header length out of bounds");
  if (h.data_offset > size) bug("header extends past the file");
  if (h.data_bytes != size - h.data_offset) bug("data size != file size - header");
  if (h.byte_order != '<' && h.byte_order != '>') bug("byte order not normalised");
  if (h.shape.size() > 64) bug("more than 64 dimensions");
  std::uint64_t n = 1;
  bool zero = false;
  for (auto d : h.shape) zero = zero || d == 0;
  if (zero) n = 0;
  else
    for (auto d : h.shape)
      if (__builtin_mul_overflow(n, d, &n)) bug("shape product overflow accepted");
  if (n != h.count) bug("count != product of the shape");
  if (h.count * h.item_size != h.data_bytes) bug("count * item_size != data bytes");
  if (h.kind != 'i' && h.kind != 'u') return;

  std::vector<std::int64_t> out;
  try {
    out = tokdyn::npy::decode_int(h, data + h.data_offset, "fuzz-input");
  } catch (const tokdyn::InputError& e) {
    check_message(e);
    if (!(h.kind == 'u' && h.item_size == 8)) bug("decode refused a value that fits int64");
    return;
  }
  if (out.size() != h.count) bug("decoded count differs");
  // Values in file order, decoded independently.
  std::vector<std::int64_t> file_order(static_cast<std::size_t>(h.count));
  for (std::size_t i = 0; i < file_order.size(); ++i) {
    const std::uint8_t* b = data + h.data_offset + i * h.item_size;
    std::uint64_t u = 0;
    for (unsigned k = 0; k < h.item_size; ++k) {
      const unsigned shift = 8 * (h.byte_order == '<' ? k : h.item_size - 1 - k);
      u |= static_cast<std::uint64_t>(b[k]) << shift;
    }
    if (h.kind == 'i' && h.item_size < 8 && (u >> (8 * h.item_size - 1)) & 1) u -= std::uint64_t(1) << (8 * h.item_size);
    file_order[i] = static_cast<std::int64_t>(u);
  }
  if (!h.fortran_order || h.shape.size() < 2) {
    if (out != file_order) bug("C-order decode differs from the file's values");
    return;
  }
  // out[c] must be file_order[f] where c and f are the C and Fortran positions of one index.
  const std::size_t rank = h.shape.size();
  for (std::size_t c = 0; c < out.size(); ++c) {
    std::uint64_t rest = c, f = 0, fstride = 1;
    std::vector<std::uint64_t> idx(rank);
    for (std::size_t k = rank; k-- > 0;) {
      idx[k] = rest % h.shape[k];
      rest /= h.shape[k];
    }
    for (std::size_t k = 0; k < rank; ++k) {
      f += idx[k] * fstride;
      fstride *= h.shape[k];
    }
    if (out[c] != file_order[static_cast<std::size_t>(f)]) bug("Fortran-order decode misplaces a value");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const tokdyn::npy::Header h = tokdyn::npy::parse_header(data, size, size, "fuzz-input");
    check(h, data, size);
  } catch (const tokdyn::InputError& e) {
    check_message(e);
  }
  return 0;
}
