// Error reporting: safe one-line messages and the exit code of each kind of failure (error.hpp).
#include "tokdyn/core/error.hpp"

#include <cerrno>
#include <filesystem>
#include <functional>
#include <new>
#include <system_error>

#include <fmt/format.h>

namespace tokdyn {

namespace {

/// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 when it is not valid UTF-8.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  unsigned min = 0;
  unsigned cp = 0;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07, min = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (cp >= 0x80 && cp <= 0x9F) return 0;  // C1 controls (e.g. CSI) are escaped too
  return n;
}

bool resource_errno(int e) {
  return e == ENOSPC || e == EACCES || e == EPERM || e == EROFS || e == EDQUOT || e == EIO || e == EMFILE ||
         e == ENFILE || e == ENOMEM || e == EFBIG;
}

}  // namespace

std::string message_line(std::string_view s, std::size_t max_chars) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\r') {
      ++i;
    } else if (c == '\n') {
      if (i + 1 < s.size()) out += "; ";
      ++i;
    } else if (c == '\t') {
      out += ' ';
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if (const std::size_t n = utf8_length(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
  }
  if (out.size() > max_chars) {
    std::size_t cut = max_chars > 3 ? max_chars - 3 : 0;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // whole characters
    out.resize(cut);
    out += "...";
  }
  return out;
}

std::string one_line(std::string s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') continue;
    if (s[i] == '\n') {
      if (i + 1 < s.size()) out += "; ";
    } else {
      out += s[i];
    }
  }
  return out;
}

void as_input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConvergenceError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw InputError(one_line(e.what()));
  } catch (const std::domain_error& e) {
    throw InputError(one_line(e.what()));
  }
}

Failure failure_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const InputError& x) {
    return {exit_code::bad_input, "error: " + message_line(x.what())};
  } catch (const ResourceError& x) {
    return {exit_code::resource, "error: " + message_line(x.what())};
  } catch (const NonFiniteError& x) {
    return {exit_code::non_finite, "error: " + message_line(x.what())};
  } catch (const BusyError& x) {
    return {exit_code::busy, "error: " + message_line(x.what())};
  } catch (const ConvergenceError& x) {
    return {exit_code::no_convergence, "error: " + message_line(x.what())};
  } catch (const std::bad_alloc&) {
    return {exit_code::resource, "error: out of memory (lower runs, tokens or depth, or see `tokdyn show PRESET`)"};
  } catch (const std::filesystem::filesystem_error& x) {
    const int err = x.code().value();
    std::string where = x.path1().empty() ? "" : fmt::format("'{}': ", x.path1().string());
    if (x.code().category() == std::generic_category() || x.code().category() == std::system_category()) {
      if (resource_errno(err))
        return {exit_code::resource, "error: " + message_line(where + x.code().message())};
    }
    return {exit_code::internal, "internal error: " + message_line(x.what())};
  } catch (const std::exception& x) {
    return {exit_code::internal, "internal error: " + message_line(x.what())};
  } catch (...) {
    return {exit_code::internal, "internal error: unknown exception"};
  }
}

}  // namespace tokdyn
