// Strict JSON parsing (see io/json_strict.hpp): duplicate keys and deep nesting refused, Python's
// non-finite number tokens accepted on request. Standard library and nlohmann::json only.
#include "tokdyn/io/json_strict.hpp"

#include <cstdio>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "tokdyn/io/printable.hpp"

namespace tokdyn::json_strict {

namespace {

using json = nlohmann::json;

enum class Special : unsigned char { None, PosInf, NegInf, NaN };

// Python's json writes float('inf') as Infinity, -inf as -Infinity and nan as NaN. Outside
// strings, each such token is replaced by a "0" padded with spaces to the token's length (so
// that the parser's line and column numbers stay those of the file), and `specials` records, for
// every number token in document order, which value it really is. The parser reports numbers in
// document order too, so the n-th number it reports is the n-th entry of `specials`. Spaces on
// both sides keep a replacement a token of its own: "-NaN" becomes "- 0 ", which stays invalid.
std::string replace_python_nonfinite(std::string_view s, std::vector<Special>& specials) {
  std::string out;
  out.reserve(s.size());
  bool in_str = false, esc = false;
  std::size_t i = 0;
  auto starts = [&](std::string_view tok) { return s.substr(i, tok.size()) == tok; };
  auto is_num_char = [](char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  };
  while (i < s.size()) {
    const char c = s[i];
    if (in_str) {
      out += c;
      ++i;
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') {
      in_str = true;
      out += c;
      ++i;
      continue;
    }
    Special sp = Special::None;
    std::size_t len = 0;
    if (starts("-Infinity")) sp = Special::NegInf, len = 9;
    else if (starts("Infinity")) sp = Special::PosInf, len = 8;
    else if (starts("NaN")) sp = Special::NaN, len = 3;
    if (sp != Special::None) {
      specials.push_back(sp);
      out += " 0";
      out.append(len - 2, ' ');
      i += len;
      continue;
    }
    if ((c >= '0' && c <= '9') || c == '-') {  // a number token: copied as it is
      specials.push_back(Special::None);
      while (i < s.size() && is_num_char(s[i])) out += s[i++];
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

// SAX handler building the document while refusing duplicate keys and deep nesting.
class StrictDom : public nlohmann::json_sax<json> {
 public:
  StrictDom(const Options& opt, const std::vector<Special>* specials) : opt_(opt), specials_(specials) {}

  Result result;

  bool null() override { return add(json(nullptr)); }
  bool boolean(bool v) override { return add(json(v)); }
  bool number_integer(number_integer_t v) override { return number(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return number(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return number(json(v)); }
  bool string(string_t& v) override { return add(json(std::move(v))); }
  bool binary(binary_t&) override {  // not produced by the JSON text parser; refuse if ever
    result.problem = Problem::Syntax;
    result.message = "binary value";
    return false;
  }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Level& top = stack_.back();
    if (top.node->contains(k)) {
      result.problem = Problem::Duplicate;
      result.key = k;
      result.depth = stack_.size();
      result.path = path_of_top();
      return false;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    std::string msg = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: <what>": drop the id.
    if (msg.rfind("[json.exception.", 0) == 0)
      if (auto p = msg.find("] "); p != std::string::npos) msg = msg.substr(p + 2);
    // The "last read" part may quote raw bytes: keep the text ASCII.
    for (char& c : msg)
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    if (msg.size() > 200) msg = msg.substr(0, 200) + "...";
    result.problem = Problem::Syntax;
    result.message = one_line(msg);
    (void)position;
    return false;
  }

  std::size_t numbers_seen() const { return next_number_; }

 private:
  struct Level {
    json* node;
    std::string name;  // the key (or [index]) under which this container sits
  };
  const Options& opt_;
  const std::vector<Special>* specials_;
  std::vector<Level> stack_;
  std::string key_;
  std::size_t next_number_ = 0;

  std::string path_of_top() const {
    std::string p;
    for (std::size_t i = 1; i < stack_.size(); ++i) {
      const std::string& n = stack_[i].name;
      if (!p.empty() && (n.empty() || n.front() != '[')) p += '.';
      p += n;
    }
    return p;
  }
  std::string child_name() const {
    if (stack_.empty()) return {};
    const json* top = stack_.back().node;
    if (top->is_array()) return "[" + std::to_string(top->size()) + "]";
    return key_;
  }
  json* place(json&& v) {
    if (stack_.empty()) {
      result.value = std::move(v);
      return &result.value;
    }
    json* top = stack_.back().node;
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    auto [it, inserted] = top->emplace(key_, std::move(v));
    return &it.value();
  }
  bool add(json&& v) {
    place(std::move(v));
    return true;
  }
  bool number(json&& v) {
    if (specials_) {
      const Special sp = next_number_ < specials_->size() ? (*specials_)[next_number_] : Special::None;
      if (sp == Special::PosInf) v = std::numeric_limits<double>::infinity();
      else if (sp == Special::NegInf) v = -std::numeric_limits<double>::infinity();
      else if (sp == Special::NaN) v = std::numeric_limits<double>::quiet_NaN();
    }
    ++next_number_;
    return add(std::move(v));
  }
  bool open(json&& v) {
    if (stack_.size() >= opt_.max_depth) {
      result.problem = Problem::TooDeep;
      result.message = "nesting deeper than " + std::to_string(opt_.max_depth) + " levels";
      return false;
    }
    std::string name = child_name();
    json* node = place(std::move(v));
    stack_.push_back({node, std::move(name)});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
};

void render(const json& v, std::string& out, std::size_t budget) {
  if (out.size() > budget) return;
  switch (v.type()) {
    case json::value_t::number_float: {
      const double d = v.get<double>();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += v.dump();
      return;
    }
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (out.size() > budget) return;
        if (!first) out += ", ";
        first = false;
        render(e, out, budget);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (out.size() > budget) return;
        if (!first) out += ", ";
        first = false;
        out += json(k).dump(-1, ' ', false, json::error_handler_t::replace);
        out += ": ";
        render(e, out, budget);
      }
      out += '}';
      return;
    }
    default:
      out += v.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

}  // namespace

std::string one_line(std::string_view s) { return escape_bytes(s, false); }

std::string brief(const json& v, std::size_t max_chars) {
  std::string out;
  render(v, out, max_chars);
  if (out.size() > max_chars) {
    std::size_t cut = max_chars;  // do not split a UTF-8 sequence
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;
    out = out.substr(0, cut) + "...";
  }
  return one_line(out);
}

Result parse(std::string_view text, const Options& opt) {
  std::vector<Special> specials;
  std::string replaced;
  std::string_view doc = text;
  if (opt.python_nonfinite) {
    replaced = replace_python_nonfinite(text, specials);
    doc = replaced;
  }
  StrictDom dom(opt, opt.python_nonfinite ? &specials : nullptr);
  const bool ok = json::sax_parse(doc.begin(), doc.end(), &dom, json::input_format_t::json, true, false);
  Result r = std::move(dom.result);
  if (r.problem == Problem::None && !ok) {
    r.problem = Problem::Syntax;
    r.message = "parse failed";
  }
  // Every number token seen by the replacement pass must be one number of the document.
  if (r.problem == Problem::None && opt.python_nonfinite && dom.numbers_seen() != specials.size()) {
    r.problem = Problem::Syntax;
    r.message = "malformed number";
  }
  // The parser's "last read" excerpt would show the replacement text ("0 ") instead of the file's
  // token: drop it then (line and column stay exact).
  if (r.problem == Problem::Syntax && !specials.empty()) {
    bool replaced_any = false;
    for (Special sp : specials) replaced_any = replaced_any || sp != Special::None;
    if (const auto p = r.message.find("; last read: "); replaced_any && p != std::string::npos) r.message.erase(p);
  }
  if (r.problem != Problem::None) r.value = json();
  return r;
}

std::string number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace tokdyn::json_strict
