// tokenizer.json (the Hugging Face `tokenizers` format) read into the pipeline's parts. Every type
// the file names is either implemented exactly or refused by name; a field of the wrong type, a
// merge naming a token outside the vocabulary, a truncation or padding setting (which would cut or
// pad prompts silently) are refused with the file and the field in the message.
#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "tokenizer_internal.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/core/sha256.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/json_strict.hpp"

namespace tokdyn {

using nlohmann::json;
using namespace tok;

namespace {

struct Reader {
  std::string src;

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InputError(fmt::format("{}: {}{}", src, where.empty() ? "" : where + ": ", what));
  }
  const json* get(const json& o, const char* key) const {
    const auto it = o.find(key);
    return it == o.end() || it->is_null() ? nullptr : &*it;
  }
  bool boolean(const json& o, const char* key, bool def, const std::string& where) const {
    const json* v = get(o, key);
    if (!v) return def;
    if (!v->is_boolean()) fail(where, fmt::format("'{}' is {}; expected true or false", key, json_strict::brief(*v)));
    return v->get<bool>();
  }
  std::string string(const json& o, const char* key, const std::string& where, const std::string* def = nullptr) const {
    const json* v = get(o, key);
    if (!v) {
      if (def) return *def;
      fail(where, fmt::format("'{}' is missing; expected a string", key));
    }
    if (!v->is_string()) fail(where, fmt::format("'{}' is {}; expected a string", key, json_strict::brief(*v)));
    return v->get<std::string>();
  }
  std::int64_t integer(const json& v, const std::string& where, const char* what, std::int64_t max) const {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > max)
      fail(where, fmt::format("{} is {}; expected an integer in [0, {}]", what, json_strict::brief(v), max));
    return v.get<std::int64_t>();
  }
  char32_t one_char(const json& o, const char* key, const std::string& where, const std::string& def) const {
    const std::string s = string(o, key, where, &def);
    std::size_t i = 0;
    if (s.empty()) fail(where, fmt::format("'{}' is empty; expected one character", key));
    const char32_t c = next_char(s, i);
    if (i != s.size()) fail(where, fmt::format("'{}' is \"{}\"; expected one character", key, json_strict::one_line(s)));
    return c;
  }
  std::string type_of(const json& o, const std::string& where) const {
    if (!o.is_object()) fail(where, fmt::format("is {}; expected an object with a 'type'", json_strict::brief(o)));
    return string(o, "type", where);
  }
  Pattern pattern(const json& o, const std::string& where) const {
    const json* p = get(o, "pattern");
    if (!p || !p->is_object() || p->size() != 1)
      fail(where, "'pattern' is missing or not {\"String\": ...} / {\"Regex\": ...}");
    Pattern r;
    if (const json* s = get(*p, "String")) {
      if (!s->is_string()) fail(where, "'pattern.String' is not a string");
      r.literal = s->get<std::string>();
      if (r.literal.empty()) fail(where, "'pattern.String' is empty; expected a non-empty string");
    } else if (const json* x = get(*p, "Regex")) {
      if (!x->is_string()) fail(where, "'pattern.Regex' is not a string");
      r.regex = std::make_shared<const Regex>(x->get<std::string>(), fmt::format("{}: {}", src, where));
    } else {
      fail(where, fmt::format("'pattern' is {}; expected {{\"String\": ...}} or {{\"Regex\": ...}}", json_strict::brief(*p)));
    }
    return r;
  }
  Prepend prepend_scheme(const json& o, const std::string& where) const {
    if (const json* v = get(o, "prepend_scheme")) {
      const std::string s = v->is_string() ? v->get<std::string>() : "";
      if (s == "always") return Prepend::Always;
      if (s == "first") return Prepend::First;
      if (s == "never") return Prepend::Never;
      fail(where, fmt::format("'prepend_scheme' is {}; expected \"always\", \"first\" or \"never\"", json_strict::brief(*v)));
    }
    return boolean(o, "add_prefix_space", true, where) ? Prepend::Always : Prepend::Never;
  }
  const json& list(const json& o, const char* key, const std::string& where) const {
    const json* v = get(o, key);
    if (!v || !v->is_array()) fail(where, fmt::format("'{}' is missing or not a list", key));
    return *v;
  }

  Normalizer normalizer(const json& o, const std::string& where) const {
    const std::string t = type_of(o, where);
    Normalizer n;
    if (t == "Sequence") {
      n.kind = Normalizer::Kind::Sequence;
      const json& l = list(o, "normalizers", where);
      for (std::size_t k = 0; k < l.size(); ++k) n.seq.push_back(normalizer(l[k], fmt::format("{}.normalizers[{}]", where, k)));
    } else if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") {
      n.kind = Normalizer::Kind::Form;
      n.form = t == "NFC" ? NormalForm::NFC : t == "NFD" ? NormalForm::NFD : t == "NFKC" ? NormalForm::NFKC : NormalForm::NFKD;
    } else if (t == "Strip") {
      n.kind = Normalizer::Kind::Strip;
      n.left = boolean(o, "strip_left", true, where);
      n.right = boolean(o, "strip_right", true, where);
    } else if (t == "Prepend") {
      n.kind = Normalizer::Kind::Prepend;
      n.text = string(o, "prepend", where);
    } else if (t == "Replace") {
      n.kind = Normalizer::Kind::Replace;
      n.pattern = pattern(o, where);
      n.text = string(o, "content", where);
    } else {
      fail(where, fmt::format("normalizer type '{}' is not supported (tokdyn implements Sequence, NFC, NFD, NFKC, NFKD, Strip, "
                              "Prepend and Replace)", json_strict::one_line(t)));
    }
    return n;
  }

  PreTokenizer pre(const json& o, const std::string& where) const {
    const std::string t = type_of(o, where);
    PreTokenizer p;
    if (t == "Sequence") {
      p.kind = PreTokenizer::Kind::Sequence;
      const json& l = list(o, "pretokenizers", where);
      for (std::size_t k = 0; k < l.size(); ++k) p.seq.push_back(pre(l[k], fmt::format("{}.pretokenizers[{}]", where, k)));
    } else if (t == "ByteLevel") {
      p.kind = PreTokenizer::Kind::ByteLevel;
      p.add_prefix_space = boolean(o, "add_prefix_space", true, where);
      p.use_regex = boolean(o, "use_regex", true, where);
    } else if (t == "Split") {
      p.kind = PreTokenizer::Kind::Split;
      p.pattern = pattern(o, where);
      const std::string b = string(o, "behavior", where);
      if (b == "Removed") p.behavior = SplitBehavior::Removed;
      else if (b == "Isolated") p.behavior = SplitBehavior::Isolated;
      else if (b == "MergedWithPrevious") p.behavior = SplitBehavior::MergedWithPrevious;
      else if (b == "MergedWithNext") p.behavior = SplitBehavior::MergedWithNext;
      else if (b == "Contiguous") p.behavior = SplitBehavior::Contiguous;
      else fail(where, fmt::format("'behavior' is \"{}\"; expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
                                   "Contiguous", json_strict::one_line(b)));
      p.invert = boolean(o, "invert", false, where);
    } else if (t == "Metaspace") {
      p.kind = PreTokenizer::Kind::Metaspace;
      const char32_t c = one_char(o, "replacement", where, "\u2581");
      p.replacement.clear();
      append_utf8(p.replacement, c);
      p.prepend = prepend_scheme(o, where);
      p.split = boolean(o, "split", true, where);
    } else if (t == "Whitespace") {
      p.kind = PreTokenizer::Kind::Whitespace;
      p.pattern.regex = std::make_shared<const Regex>(R"(\w+|[^\w\s]+)", "Whitespace");
      p.behavior = SplitBehavior::Removed;
      p.invert = true;
    } else if (t == "WhitespaceSplit") {
      p.kind = PreTokenizer::Kind::WhitespaceSplit;
    } else if (t == "Digits") {
      p.kind = PreTokenizer::Kind::Digits;
      p.individual_digits = boolean(o, "individual_digits", false, where);
    } else {
      fail(where, fmt::format("pre-tokenizer type '{}' is not supported (tokdyn implements Sequence, ByteLevel, Split, Metaspace, "
                              "Whitespace, WhitespaceSplit and Digits)", json_strict::one_line(t)));
    }
    return p;
  }

  PostProcessor post(const json& o, const std::string& where) const {
    const std::string t = type_of(o, where);
    PostProcessor p;
    if (t == "Sequence") {
      p.kind = PostProcessor::Kind::Sequence;
      const json& l = list(o, "processors", where);
      for (std::size_t k = 0; k < l.size(); ++k) p.seq.push_back(post(l[k], fmt::format("{}.processors[{}]", where, k)));
    } else if (t == "ByteLevel") {
      p.kind = PostProcessor::Kind::ByteLevel;
    } else if (t == "TemplateProcessing") {
      p.kind = PostProcessor::Kind::Template;
      const json* sp = get(o, "special_tokens");
      if (sp && !sp->is_object()) fail(where, "'special_tokens' is not an object");
      if (sp)
        for (auto it = sp->begin(); it != sp->end(); ++it) {
          const std::string w = fmt::format("{}.special_tokens.{}", where, json_strict::one_line(it.key()));
          const json& ids = list(*it, "ids", w);
          const json& toks = list(*it, "tokens", w);
          if (ids.size() != toks.size()) fail(w, "'ids' and 'tokens' differ in length");
          std::pair<std::vector<std::int64_t>, std::vector<std::string>> v;
          for (const json& i : ids) v.first.push_back(integer(i, w, "an id", (std::int64_t{1} << 31) - 1));
          for (const json& s : toks) {
            if (!s.is_string()) fail(w, "'tokens' holds a non-string");
            v.second.push_back(s.get<std::string>());
          }
          p.specials[it.key()] = std::move(v);
        }
      const json& single = list(o, "single", where);
      for (std::size_t k = 0; k < single.size(); ++k) {
        const json& item = single[k];
        const std::string w = fmt::format("{}.single[{}]", where, k);
        if (const json* s = item.is_object() ? get(item, "SpecialToken") : nullptr) {
          const std::string name = string(*s, "id", w);
          if (!p.specials.count(name)) fail(w, fmt::format("special token '{}' is not in 'special_tokens'", json_strict::one_line(name)));
          p.single.emplace_back(false, name);
        } else if (const json* q = item.is_object() ? get(item, "Sequence") : nullptr) {
          const std::string id = string(*q, "id", w);
          if (id != "A") fail(w, fmt::format("sequence '{}' in the single template; expected A", json_strict::one_line(id)));
          p.single.emplace_back(true, "");
        } else {
          fail(w, fmt::format("is {}; expected {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}", json_strict::brief(item)));
        }
      }
    } else if (t == "BertProcessing" || t == "RobertaProcessing") {
      p.kind = PostProcessor::Kind::Bert;
      for (const char* key : {"cls", "sep"}) {
        const json& pair = list(o, key, where);
        if (pair.size() != 2 || !pair[0].is_string())
          fail(where, fmt::format("'{}' is {}; expected [token, id]", key, json_strict::brief(pair)));
        const std::int64_t id = integer(pair[1], where, key, (std::int64_t{1} << 31) - 1);
        p.specials[key] = {{id}, {pair[0].get<std::string>()}};
      }
      p.single = {{false, "cls"}, {true, ""}, {false, "sep"}};
    } else {
      fail(where, fmt::format("post-processor type '{}' is not supported (tokdyn implements Sequence, ByteLevel, "
                              "TemplateProcessing, BertProcessing and RobertaProcessing)", json_strict::one_line(t)));
    }
    return p;
  }

  Decoder decoder(const json& o, const std::string& where) const {
    const std::string t = type_of(o, where);
    Decoder d;
    if (t == "Sequence") {
      d.kind = Decoder::Kind::Sequence;
      const json& l = list(o, "decoders", where);
      for (std::size_t k = 0; k < l.size(); ++k) d.seq.push_back(decoder(l[k], fmt::format("{}.decoders[{}]", where, k)));
    } else if (t == "ByteLevel") {
      d.kind = Decoder::Kind::ByteLevel;
    } else if (t == "Replace") {
      d.kind = Decoder::Kind::Replace;
      d.pattern = pattern(o, where);
      d.content = string(o, "content", where);
    } else if (t == "ByteFallback") {
      d.kind = Decoder::Kind::ByteFallback;
    } else if (t == "Fuse") {
      d.kind = Decoder::Kind::Fuse;
    } else if (t == "Strip") {
      d.kind = Decoder::Kind::Strip;
      d.strip_char = one_char(o, "content", where, " ");
      const json* a = get(o, "start");
      const json* b = get(o, "stop");
      d.start = a ? static_cast<std::size_t>(integer(*a, where, "'start'", 1 << 20)) : 0;
      d.stop = b ? static_cast<std::size_t>(integer(*b, where, "'stop'", 1 << 20)) : 0;
    } else if (t == "Metaspace") {
      d.kind = Decoder::Kind::Metaspace;
      const char32_t c = one_char(o, "replacement", where, "\u2581");
      d.replacement.clear();
      append_utf8(d.replacement, c);
      d.prepend = prepend_scheme(o, where);
    } else if (t == "BPEDecoder") {
      d.kind = Decoder::Kind::BPE;
      const std::string def = "</w>";
      d.content = string(o, "suffix", where, &def);
      if (d.content.empty()) fail(where, "'suffix' is empty");
    } else {
      fail(where, fmt::format("decoder type '{}' is not supported (tokdyn implements Sequence, ByteLevel, Replace, ByteFallback, "
                              "Fuse, Strip, Metaspace and BPEDecoder)", json_strict::one_line(t)));
    }
    return d;
  }

  void model(const json& o, Bpe& m) const {
    const std::string where = "model";
    if (!o.is_object()) fail(where, "is missing or not an object");
    const json* ty = get(o, "type");
    if (ty && (!ty->is_string() || ty->get<std::string>() != "BPE"))
      fail(where, fmt::format("model type {} is not supported (tokdyn implements BPE models)", json_strict::brief(*ty)));
    if (!ty && !get(o, "merges")) fail(where, "has no 'type' and no 'merges'; expected a BPE model");
    if (const json* d = get(o, "dropout")) {
      if (!d->is_number() || d->get<double>() < 0 || d->get<double>() > 1)
        fail(where, fmt::format("'dropout' is {}; expected null or a number in [0, 1]", json_strict::brief(*d)));
      if (d->get<double>() != 0)
        fail(where, fmt::format("'dropout' is {}: BPE dropout makes encoding random (a training device); expected null or 0",
                                json_strict::brief(*d)));
    }
    const json* vocab = get(o, "vocab");
    if (!vocab || !vocab->is_object()) fail(where, "'vocab' is missing or not an object of token -> id");
    const std::int64_t max_id = (std::int64_t{1} << 31) - 2;
    m.vocab.reserve(vocab->size());
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      const std::int64_t id = integer(it.value(), where, "a vocabulary id", max_id);
      m.vocab.emplace(it.key(), id);
      if (static_cast<std::size_t>(id) >= m.vocab_r.size()) {
        if (static_cast<std::size_t>(id) > 4 * vocab->size() + 1024)
          fail(where, fmt::format("vocabulary id {} of '{}' is far beyond the {} entries; expected ids 0..{}", id,
                                  json_strict::one_line(it.key()), vocab->size(), vocab->size() - 1));
        m.vocab_r.resize(static_cast<std::size_t>(id) + 1);
        m.present.resize(static_cast<std::size_t>(id) + 1, 0);
      }
      m.vocab_r[static_cast<std::size_t>(id)] = it.key();
      m.present[static_cast<std::size_t>(id)] = 1;
    }
    const std::string none;
    if (const json* u = get(o, "unk_token")) {
      if (!u->is_string()) fail(where, "'unk_token' is not a string");
      m.unk_token = u->get<std::string>();
      const auto it = m.vocab.find(m.unk_token);
      m.unk_id = it == m.vocab.end() ? -1 : it->second;
    }
    if (const json* p = get(o, "continuing_subword_prefix")) {
      if (!p->is_string()) fail(where, "'continuing_subword_prefix' is not a string");
      m.prefix = p->get<std::string>();
      m.has_prefix = true;
    }
    if (const json* s = get(o, "end_of_word_suffix")) {
      if (!s->is_string()) fail(where, "'end_of_word_suffix' is not a string");
      m.suffix = s->get<std::string>();
      m.has_suffix = true;
    }
    m.fuse_unk = boolean(o, "fuse_unk", false, where);
    m.byte_fallback = boolean(o, "byte_fallback", false, where);
    m.ignore_merges = boolean(o, "ignore_merges", false, where);
    for (int b = 0; b < 256; ++b) {
      const auto it = m.vocab.find(fmt::format("<0x{:02X}>", b));
      m.byte_ids[b] = it == m.vocab.end() ? -1 : it->second;
    }
    const json& merges = list(o, "merges", where);
    m.merges.reserve(merges.size());
    const std::size_t plen = m.has_prefix ? m.prefix.size() : 0;
    std::string merged;
    for (std::size_t r = 0; r < merges.size(); ++r) {
      const json& x = merges[r];
      std::string_view a, b;
      std::string line;
      if (x.is_string()) {
        line = x.get<std::string>();
        const std::size_t sp = line.find(' ');
        if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
          fail(where, fmt::format("merge {} is \"{}\"; expected two tokens separated by one space", r, json_strict::one_line(line)));
        a = std::string_view(line).substr(0, sp);
        b = std::string_view(line).substr(sp + 1);
      } else if (x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string()) {
        a = x[0].get_ref<const std::string&>();
        b = x[1].get_ref<const std::string&>();
      } else {
        fail(where, fmt::format("merge {} is {}; expected \"a b\" or [\"a\", \"b\"]", r, json_strict::brief(x)));
      }
      const auto ia = m.vocab.find(a), ib = m.vocab.find(b);
      if (ia == m.vocab.end() || ib == m.vocab.end())
        fail(where, fmt::format("merge {} (\"{} {}\") names '{}', which is not in the vocabulary", r, json_strict::one_line(a),
                                json_strict::one_line(b), json_strict::one_line(ia == m.vocab.end() ? a : b)));
      merged.assign(a);
      merged.append(b.substr(std::min(plen, b.size())));
      const auto im = m.vocab.find(merged);
      if (im == m.vocab.end())
        fail(where, fmt::format("merge {} (\"{} {}\") makes '{}', which is not in the vocabulary", r, json_strict::one_line(a),
                                json_strict::one_line(b), json_strict::one_line(merged)));
      const std::uint64_t key = (static_cast<std::uint64_t>(ia->second) << 32) | static_cast<std::uint64_t>(ib->second);
      m.merges[key] = {static_cast<std::int32_t>(r), static_cast<std::int32_t>(im->second)};
    }
  }
};

std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + v[k];
  return s;
}

}  // namespace

std::string tok::Normalizer::name() const {
  switch (kind) {
    case Kind::Sequence: {
      std::vector<std::string> v;
      for (const auto& n : seq) v.push_back(n.name());
      return "Sequence[" + join_names(v) + "]";
    }
    case Kind::Form: return form == NormalForm::NFC ? "NFC" : form == NormalForm::NFD ? "NFD" : form == NormalForm::NFKC ? "NFKC" : "NFKD";
    case Kind::Strip: return "Strip";
    case Kind::Prepend: return "Prepend";
    case Kind::Replace: return "Replace";
  }
  return "?";
}

std::string tok::PreTokenizer::name() const {
  switch (kind) {
    case Kind::Sequence: {
      std::vector<std::string> v;
      for (const auto& n : seq) v.push_back(n.name());
      return "Sequence[" + join_names(v) + "]";
    }
    case Kind::ByteLevel: return use_regex ? "ByteLevel" : "ByteLevel(no regex)";
    case Kind::Split: return "Split";
    case Kind::Metaspace: return "Metaspace";
    case Kind::Whitespace: return "Whitespace";
    case Kind::WhitespaceSplit: return "WhitespaceSplit";
    case Kind::Digits: return "Digits";
  }
  return "?";
}

std::string tok::PostProcessor::name() const {
  switch (kind) {
    case Kind::Sequence: {
      std::vector<std::string> v;
      for (const auto& n : seq) v.push_back(n.name());
      return "Sequence[" + join_names(v) + "]";
    }
    case Kind::ByteLevel: return "ByteLevel";
    case Kind::Template: return "TemplateProcessing";
    case Kind::Bert: return "BertProcessing";
  }
  return "?";
}

std::string tok::Decoder::name() const {
  switch (kind) {
    case Kind::Sequence: {
      std::vector<std::string> v;
      for (const auto& n : seq) v.push_back(n.name());
      return "Sequence[" + join_names(v) + "]";
    }
    case Kind::ByteLevel: return "ByteLevel";
    case Kind::Replace: return "Replace";
    case Kind::ByteFallback: return "ByteFallback";
    case Kind::Fuse: return "Fuse";
    case Kind::Strip: return "Strip";
    case Kind::Metaspace: return "Metaspace";
    case Kind::BPE: return "BPEDecoder";
  }
  return "?";
}

Tokenizer Tokenizer::from_json(std::string_view text, const std::string& name) {
  Reader R{name};
  json_strict::Options opt;
  opt.max_depth = 64;
  json_strict::Result parsed = json_strict::parse(text, opt);
  switch (parsed.problem) {
    case json_strict::Problem::None: break;
    case json_strict::Problem::Syntax: R.fail("", fmt::format("not valid JSON ({})", parsed.message));
    case json_strict::Problem::Duplicate:
      R.fail("", fmt::format("key '{}' given twice{}", json_strict::one_line(parsed.key),
                             parsed.path.empty() ? std::string() : " in " + json_strict::one_line(parsed.path)));
    case json_strict::Problem::TooDeep: R.fail("", fmt::format("nested too deeply ({})", parsed.message));
  }
  const json& j = parsed.value;
  if (!j.is_object()) R.fail("", "expected a JSON object (a tokenizer.json)");
  auto impl = std::make_shared<Impl>();
  impl->source = name;
  impl->sha = sha256_hex(text);
  for (const char* key : {"truncation", "padding"})
    if (const json* v = R.get(j, key))
      R.fail(key, fmt::format("is set ({}): tokdyn encodes whole prompts and neither truncates nor pads them; expected null",
                              json_strict::brief(*v)));
  const json* model = R.get(j, "model");
  if (!model) R.fail("model", "is missing; expected the tokenizer's model");
  R.model(*model, impl->bpe);
  if (const json* n = R.get(j, "normalizer")) impl->normalizer = std::make_unique<tok::Normalizer>(R.normalizer(*n, "normalizer"));
  if (const json* p = R.get(j, "pre_tokenizer")) impl->pre = std::make_unique<tok::PreTokenizer>(R.pre(*p, "pre_tokenizer"));
  if (const json* p = R.get(j, "post_processor")) impl->post = std::make_unique<tok::PostProcessor>(R.post(*p, "post_processor"));
  if (const json* d = R.get(j, "decoder")) impl->decoder = std::make_unique<tok::Decoder>(R.decoder(*d, "decoder"));
  std::int64_t top = static_cast<std::int64_t>(impl->bpe.vocab_r.size()) - 1;
  if (const json* a = R.get(j, "added_tokens")) {
    if (!a->is_array()) R.fail("added_tokens", "is not a list");
    for (std::size_t k = 0; k < a->size(); ++k) {
      const json& t = (*a)[k];
      const std::string w = fmt::format("added_tokens[{}]", k);
      if (!t.is_object()) R.fail(w, "is not an object");
      AddedToken x;
      const json* id = R.get(t, "id");
      if (!id) R.fail(w, "'id' is missing");
      x.id = R.integer(*id, w, "'id'", (std::int64_t{1} << 31) - 2);
      x.content = R.string(t, "content", w);
      if (x.content.empty()) R.fail(w, "'content' is empty");
      x.special = R.boolean(t, "special", false, w);
      x.single_word = R.boolean(t, "single_word", false, w);
      x.lstrip = R.boolean(t, "lstrip", false, w);
      x.rstrip = R.boolean(t, "rstrip", false, w);
      x.normalized = R.boolean(t, "normalized", !x.special, w);
      top = std::max(top, x.id);
      impl->added_by_id[x.id] = impl->added.size();
      impl->added_by_content[x.content] = x.id;
      impl->added.push_back(std::move(x));
    }
  }
  for (std::size_t k = 0; k < impl->added.size(); ++k) {
    const AddedToken& x = impl->added[k];
    if (!x.normalized) {
      impl->raw_tokens.push_back(k);
    } else {
      std::string c = x.content;
      if (impl->normalizer) impl->normalizer->apply(c);
      if (c.empty()) continue;
      impl->normalized_tokens.push_back(k);
      impl->normalized_content.push_back(std::move(c));
    }
  }
  impl->vocab_size = top + 1;
  return Tokenizer(std::move(impl));
}

std::filesystem::path find_tokenizer_json(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    const auto f = path / "tokenizer.json";
    return std::filesystem::is_regular_file(f, ec) ? f : std::filesystem::path();
  }
  if (!std::filesystem::is_regular_file(path, ec)) return {};
  if (path.extension() == ".json") return path;
  const auto f = path.parent_path() / "tokenizer.json";
  return std::filesystem::is_regular_file(f, ec) ? f : std::filesystem::path();
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw InputError(fmt::format("{}: no such file or folder; expected a tokenizer.json or a checkpoint folder holding one",
                                 path.string()));
  const std::filesystem::path f = find_tokenizer_json(path);
  if (f.empty())
    throw InputError(fmt::format("{}: no tokenizer.json there; expected a tokenizer.json or a checkpoint folder holding one",
                                 path.string()));
  const std::string text = read_regular_file(f, std::uint64_t{1} << 30, f.string());
  return from_json(text, f.string());
}

std::string Tokenizer::summary() const {
  const Impl& T = *impl_;
  std::string s = fmt::format("BPE ({} tokens, {} merges{}{})", T.bpe.vocab.size(), T.bpe.merges.size(),
                              T.bpe.byte_fallback ? ", byte fallback" : "", T.bpe.ignore_merges ? ", ignore_merges" : "");
  if (T.normalizer) s += ", normalizer " + T.normalizer->name();
  if (T.pre) s += ", pre-tokenizer " + T.pre->name();
  if (T.post) s += ", post-processor " + T.post->name();
  if (T.decoder) s += ", decoder " + T.decoder->name();
  if (!T.added.empty()) s += fmt::format(", {} added tokens", T.added.size());
  return s;
}

}  // namespace tokdyn
