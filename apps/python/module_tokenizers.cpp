// tokdyn._core's tokenizers (see module.cpp): a checkpoint's tokenizer.json read, texts (str or
// UTF-8 bytes) encoded one by one or as a batch on threads without the GIL, ids (lists or NumPy
// integer arrays) decoded, and the Encoding class of one encoded text.
#include "module_internal.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/tokenizer.hpp"

namespace tokdyn::python {
namespace {

// ---- tokenizers (io/tokenizer.hpp) ----

std::string type_name(const py::handle& obj) { return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>(); }

/// A text argument as UTF-8 bytes: a str (a lone surrogate passes through as its 3 bytes, which the
/// tokenizer then refuses as invalid UTF-8, with the byte offset) or bytes (taken as UTF-8).
std::string text_of(const py::handle& obj, const std::string& what) {
  if (PyBytes_Check(obj.ptr())) return std::string(PyBytes_AS_STRING(obj.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(obj.ptr())));
  if (!PyUnicode_Check(obj.ptr()))
    throw InputError(fmt::format("{}: type {}; expected a str", what, type_name(obj)));
  py::object b = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(obj.ptr(), "utf-8", "surrogatepass"));
  if (!b) throw py::error_already_set();
  return std::string(PyBytes_AS_STRING(b.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(b.ptr())));
}

/// Token ids from a list (or any sequence) of ints or a 1-D NumPy integer array.
std::vector<std::int64_t> ids_of(const py::handle& obj) {
  std::vector<std::int64_t> ids;
  if (py::isinstance<py::array>(obj)) {
    const auto a = py::reinterpret_borrow<py::array>(obj);
    const char kind = a.dtype().kind();
    if (kind != 'i' && kind != 'u')
      throw InputError(fmt::format("ids: a NumPy array of dtype {}; expected integer token ids", py::str(a.dtype()).cast<std::string>()));
    if (a.ndim() != 1) throw InputError(fmt::format("ids: shape {}; expected one sequence of token ids [n]", shape_text(a)));
    if (kind == 'u' && a.itemsize() == 8) {
      const auto u = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
      for (py::ssize_t k = 0; k < u.shape(0); ++k) {
        if (u.data()[k] > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          throw InputError(fmt::format("ids[{}] is {}; expected a token id of the vocabulary", k, u.data()[k]));
        ids.push_back(static_cast<std::int64_t>(u.data()[k]));
      }
      return ids;
    }
    const auto c = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    ids.assign(c.data(), c.data() + c.shape(0));
    return ids;
  }
  if (PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()) || !PySequence_Check(obj.ptr()))
    throw InputError(fmt::format("ids: type {}; expected a list or a NumPy array of integer token ids", type_name(obj)));
  const auto seq = py::reinterpret_borrow<py::sequence>(obj);
  ids.reserve(seq.size());
  for (std::size_t k = 0; k < seq.size(); ++k) {
    const py::object x = seq[k];
    py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(x.ptr()));
    if (!i) {
      PyErr_Clear();
      throw InputError(fmt::format("ids[{}]: type {}; expected an integer token id", k, type_name(x)));
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow != 0)
      throw InputError(fmt::format("ids[{}] is {}; expected a token id of the vocabulary", k, py::str(i).cast<std::string>()));
    ids.push_back(static_cast<std::int64_t>(v));
  }
  return ids;
}

/// One encoded text as Python sees it; `texts` (each piece decoded alone) is computed when first read.
class PyEncoding {
 public:
  PyEncoding(Encoding e, Tokenizer t) : e_(std::move(e)), t_(std::move(t)) {}

  py::array_t<std::int64_t> ids() const {
    py::array_t<std::int64_t> a(static_cast<py::ssize_t>(e_.ids.size()));
    std::copy(e_.ids.begin(), e_.ids.end(), a.mutable_data());
    return a;
  }
  const std::vector<std::string>& pieces() const { return e_.pieces; }
  std::vector<bool> special() const { return std::vector<bool>(e_.special.begin(), e_.special.end()); }
  const std::vector<std::string>& unknown() const { return e_.unknown; }
  /// piece_text of each id: the labels. A piece whose id the vocabulary lacks (a template's special
  /// token outside it) keeps its piece string.
  const std::vector<std::string>& texts() const {
    if (!texts_) {
      std::vector<std::string> v;
      v.reserve(e_.ids.size());
      for (std::size_t k = 0; k < e_.ids.size(); ++k) {
        try {
          v.push_back(t_.piece_text(e_.ids[k]));
        } catch (const InputError&) {
          v.push_back(e_.pieces[k]);
        }
      }
      texts_ = std::move(v);
    }
    return *texts_;
  }
  std::size_t size() const { return e_.ids.size(); }
  bool equals(const PyEncoding& o) const {
    return e_.ids == o.e_.ids && e_.pieces == o.e_.pieces && e_.special == o.e_.special && e_.unknown == o.e_.unknown;
  }
  std::string repr() const {
    constexpr std::size_t shown = 12;
    const std::size_t n = e_.ids.size();
    std::vector<std::string> ids, pieces;
    for (std::size_t k = 0; k < std::min(n, shown); ++k) {
      ids.push_back(std::to_string(e_.ids[k]));
      pieces.push_back(py::repr(py::str(e_.pieces[k])).cast<std::string>());
    }
    const std::string more = n > shown ? ", ..." : "";
    std::string s = fmt::format("Encoding({} token{}: ids=[{}{}], pieces=[{}{}]", n, n == 1 ? "" : "s", fmt::join(ids, ", "), more,
                                fmt::join(pieces, ", "), more);
    if (!e_.unknown.empty()) s += fmt::format(", unknown={}", py::repr(py::cast(e_.unknown)).cast<std::string>());
    return s + ")";
  }

 private:
  Encoding e_;
  Tokenizer t_;
  mutable std::optional<std::vector<std::string>> texts_;
};

Tokenizer tokenizer_from_checkpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError(fmt::format("{}: {}; expected a checkpoint folder holding a tokenizer.json (Tokenizer.from_file reads a file)",
                                 dir.string(), std::filesystem::exists(dir, ec) ? "not a folder" : "no such folder"));
  if (!std::filesystem::is_regular_file(dir / "tokenizer.json", ec))
    throw InputError(fmt::format("no tokenizer.json in {}; expected a checkpoint folder holding the tokenizer's tokenizer.json",
                                 dir.string()));
  return Tokenizer::from_file(dir);
}

PyEncoding tokenizer_encode(const Tokenizer& t, const py::object& text, bool add_special_tokens) {
  const std::string s = text_of(text, "text");
  Encoding e;
  {
    py::gil_scoped_release release;
    e = t.encode(s, add_special_tokens);
  }
  return PyEncoding(std::move(e), t);
}

std::vector<PyEncoding> tokenizer_encode_batch(const Tokenizer& t, const py::object& texts, bool add_special_tokens, int threads) {
  if (PyUnicode_Check(texts.ptr()) || PyBytes_Check(texts.ptr()))
    throw InputError(fmt::format("texts: type {}; expected a list of str (encode takes one text)", type_name(texts)));
  if (threads < 0) throw InputError(fmt::format("threads: expected 0 (every core) or a positive count, got {}", threads));
  if (!py::isinstance<py::iterable>(texts))
    throw InputError(fmt::format("texts: type {}; expected a list of str", type_name(texts)));
  std::vector<std::string> v;
  for (const py::handle x : py::iter(texts)) v.push_back(text_of(x, fmt::format("texts[{}]", v.size())));
  std::vector<Encoding> r;
  {
    py::gil_scoped_release release;
    for (std::size_t k = 0; k < v.size(); ++k) require_utf8(v[k], fmt::format("texts[{}]", k));  // name the text
    r = t.encode_batch(v, add_special_tokens, threads);
  }
  std::vector<PyEncoding> out;
  out.reserve(r.size());
  for (Encoding& e : r) out.emplace_back(std::move(e), t);
  return out;
}

std::string tokenizer_repr(const Tokenizer& t) {
  return fmt::format("tokdyn.Tokenizer({}, vocab_size={}: {})", py::repr(py::str(t.source())).cast<std::string>(), t.vocab_size(),
                     t.summary());
}

}  // namespace

void bind_tokenizers(py::module_& mod) {
  py::class_<PyEncoding>(mod, "Encoding", "One encoded text (Tokenizer.encode): ids, pieces, special, unknown, texts.")
      .def_property_readonly("ids", &PyEncoding::ids, "The token ids (a new NumPy int64 array at each read).")
      .def_property_readonly("pieces", &PyEncoding::pieces, "The vocabulary strings of the ids (Hugging Face's tokens).")
      .def_property_readonly("special", &PyEncoding::special,
                             "Per token: an added special token, or one the post-processor's template added.")
      .def_property_readonly("unknown", &PyEncoding::unknown,
                             "The spans of the text the vocabulary could not produce (unknown token or dropped).")
      .def_property_readonly("texts", &PyEncoding::texts, "Each token decoded alone (Tokenizer.piece_text): labels.")
      .def("__len__", &PyEncoding::size)
      .def("__eq__", [](const PyEncoding& a, const py::object& b) -> py::object {
        if (!py::isinstance<PyEncoding>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::bool_(a.equals(b.cast<const PyEncoding&>()));
      })
      .def("__repr__", &PyEncoding::repr);

  py::class_<Tokenizer>(mod, "Tokenizer", "A checkpoint's tokenizer read from its tokenizer.json (see tokdyn.Tokenizer).")
      .def_static("from_file", &Tokenizer::from_file, py::arg("path"),
                  "Reads a tokenizer.json, or the tokenizer.json of a checkpoint folder (ValueError naming the file when it is "
                  "missing, malformed or uses something tokdyn does not implement).")
      .def_static("from_checkpoint", &tokenizer_from_checkpoint, py::arg("dir"),
                  "The tokenizer.json of a checkpoint folder (ValueError \"no tokenizer.json in DIR\" when it has none).")
      .def_static("from_json", [](const py::object& text, const std::string& name) { return Tokenizer::from_json(text_of(text, "json"), name); },
                  py::arg("text"), py::arg("name") = "tokenizer.json",
                  "Parses the text of a tokenizer.json; `name` is the source named in messages.")
      .def("encode", &tokenizer_encode, py::arg("text"), py::arg("add_special_tokens") = true,
           "Encodes one text (str, or bytes holding UTF-8) as Hugging Face's encode(text, add_special_tokens): "
           "add_special_tokens applies the post-processor's template (BOS / EOS). Returns an Encoding.")
      .def("encode_batch", &tokenizer_encode_batch, py::arg("texts"), py::arg("add_special_tokens") = true, py::arg("threads") = 0,
           "Encodes a list of texts on `threads` threads (0: every core) without the GIL; the same Encodings as "
           "encode one by one, whatever the thread count.")
      .def("decode", [](const Tokenizer& t, const py::object& ids, bool skip) {
        const std::vector<std::int64_t> v = ids_of(ids);
        py::gil_scoped_release release;
        return t.decode(v, skip);
      }, py::arg("ids"), py::arg("skip_special_tokens") = false,
           "Decodes token ids (a list or a 1-D NumPy integer array) as Hugging Face's decode(ids, skip_special_tokens); "
           "ValueError for an id outside the vocabulary.")
      .def("piece_text", &Tokenizer::piece_text, py::arg("id"),
           "One id decoded alone: the piece as text, for labels (' world' for GPT-2's 'Ġworld').")
      .def("token_to_id", [](const Tokenizer& t, const std::string& token) { return t.token_to_id(token); }, py::arg("token"),
           "The id of a vocabulary string (added tokens included), or None.")
      .def("id_to_token", &Tokenizer::id_to_token, py::arg("id"),
           "The vocabulary string of an id (added tokens included); ValueError when there is none.")
      .def("is_special", &Tokenizer::is_special, py::arg("id"), "Whether the id is an added special token.")
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size, "One past the largest id (added tokens included).")
      .def_property_readonly("source", &Tokenizer::source, "The path it was read from (or the name given to from_json).")
      .def_property_readonly("summary", &Tokenizer::summary, "One line: the model and the pipeline.")
      .def_property_readonly("sha256", &Tokenizer::sha256, "SHA-256 of the tokenizer.json bytes (hex), for manifests.")
      .def("__repr__", &tokenizer_repr);
}

}  // namespace tokdyn::python
