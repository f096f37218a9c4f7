// Decoder-family checkpoints (models/decoder/checkpoint.hpp).
#include "tokdyn/models/decoder/checkpoint.hpp"

#include <cmath>
#include <map>
#include <set>
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/json_strict.hpp"
#include "tokdyn/io/safetensors.hpp"

namespace fs = std::filesystem;

namespace tokdyn::decoder {
namespace {

std::string dims_text(const std::vector<std::uint64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

fs::path dir_of(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) ? p : p.parent_path();
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

}  // namespace

Arch parse_config_text(const Family& f, const std::string& text, const std::string& what) {
  json_strict::Options opt;
  opt.max_depth = 16;
  const json_strict::Result r = json_strict::parse(text, opt);
  switch (r.problem) {
    case json_strict::Problem::None: break;
    case json_strict::Problem::Duplicate:
      throw InputError(fmt::format("{}: duplicate key '{}'; expected each key once", what, json_strict::one_line(r.key)));
    case json_strict::Problem::TooDeep:
      throw InputError(fmt::format("{}: JSON nests deeper than {} levels; expected a {} config.json", what, opt.max_depth, f.name));
    case json_strict::Problem::Syntax:
      throw InputError(fmt::format("{}: not valid JSON ({}); expected a {} config.json", what, json_strict::one_line(r.message), f.name));
  }
  return f.parse_config(r.value, what);
}

Arch read_config(const Family& f, const fs::path& path_or_dir) {
  std::error_code ec;
  if (!fs::exists(path_or_dir, ec))
    throw InputError(fmt::format("{}: no such file or directory; expected a checkpoint directory (config.json + model.safetensors)",
                                 path_or_dir.string()));
  const fs::path cfg = dir_of(path_or_dir) / "config.json";
  if (!fs::exists(cfg, ec))
    throw InputError(fmt::format("{}: missing config.json; expected it beside the checkpoint's safetensors", dir_of(path_or_dir).string()));
  const std::string what = cfg.string();
  return parse_config_text(f, read_regular_file(cfg, 1u << 20, what), what);
}

std::uint64_t memory_bytes(const Arch& a) { return static_cast<std::uint64_t>(a.parameters()) * 4u; }

Model load(const Family& f, const fs::path& path) {
  const Arch a = read_config(f, path);
  std::error_code ec;
  fs::path wpath = path;
  if (fs::is_directory(path, ec) && !fs::exists(path / "model.safetensors", ec) && !fs::exists(path / "model.safetensors.index.json", ec)) {
    for (const char* bin : {"pytorch_model.bin", "model.bin"})
      if (fs::exists(path / bin, ec)) wpath = path / bin;  // the reader explains how to convert it
    if (wpath == path)
      throw InputError(fmt::format("{}: no model.safetensors or model.safetensors.index.json; expected a safetensors checkpoint",
                                   path.string()));
  }
  // Refuse before reading any weight: the float32 weights (from config.json) against this machine's memory.
  {
    const auto pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const std::uint64_t ram = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
    const std::uint64_t need = memory_bytes(a);
    if (ram > 0 && need > ram / 2)
      throw ResourceError(fmt::format("{}: the model needs about {} as float32 in memory (estimated from config.json), and this "
                                      "machine has {} of RAM; expected a checkpoint that fits in half of it",
                                      wpath.string(), bytes_text(need), bytes_text(ram)));
  }
  st::Tensors T(wpath);
  const std::string what = wpath.string();
  const std::vector<TensorSlot> slots = f.tensors(a);
  // A name as stored: the slot's, or without one of the family's optional prefixes.
  std::map<std::string, std::string> stored;  // slot name -> stored name
  for (const TensorSlot& s : slots) {
    std::string n = s.name;
    if (!T.find(n))
      for (const std::string& p : f.optional_prefixes)
        if (n.rfind(p, 0) == 0 && T.find(n.substr(p.size()))) n = n.substr(p.size());
    const st::TensorInfo* t = T.find(n);
    if (!t)
      throw InputError(fmt::format("{}: missing tensor '{}' (shape {}); expected a {} checkpoint matching config.json", what, s.name,
                                   dims_text(s.shape), f.hf_class));
    if (t->shape != s.shape)
      throw InputError(fmt::format("{}: tensor '{}' has shape {}; config.json implies {}", what, n, dims_text(t->shape),
                                   dims_text(s.shape)));
    stored[s.name] = n;
  }
  std::set<std::string> used;
  for (const auto& [k, v] : stored) used.insert(v);
  for (const std::string& n : T.names()) {
    if (used.count(n)) continue;
    bool ok = false;
    for (const std::string& suf : f.ignorable_suffixes) ok = ok || ends_with(n, suf);
    if (!ok)
      throw InputError(fmt::format("{}: unexpected tensor '{}'; expected only the {} tensors for {} layers", what, n, f.hf_class, a.n_layer));
  }
  Model m = allocate(a);
  std::vector<float> buf;
  for (const TensorSlot& s : slots) {
    const std::string& n = stored.at(s.name);
    const st::TensorInfo* t = T.find(n);
    buf.resize(t->numel());
    T.file_of(n)->read_float(*t, buf.data());
    for (std::size_t i = 0; i < buf.size(); ++i)
      if (!std::isfinite(buf[i]))
        throw InputError(fmt::format("{}: tensor '{}' holds a non-finite value (NaN or Inf) at flat index {}; expected finite weights",
                                     what, n, i));
    s.load(m, buf.data());
  }
  if (const auto meta = T.metadata(); meta.count("tokdyn")) m.generated_by = meta.at("tokdyn");
  m.source = fs::absolute(path, ec).string();
  return m;
}

void save(const Family& f, const Model& m, const fs::path& dir) {
  const std::vector<TensorSlot> slots = f.tensors(m.arch);
  std::vector<std::vector<float>> data;
  data.reserve(slots.size());
  std::vector<st::TensorToWrite> w;
  for (const TensorSlot& s : slots) {
    data.push_back(s.save(m));
    w.push_back({s.name, st::DType::F32, s.shape, data.back().data()});
  }
  std::map<std::string, std::string> meta{{"format", "pt"}};
  if (!m.generated_by.empty()) meta["tokdyn"] = m.generated_by;
  st::write_checkpoint_dir(dir, m.arch.config.dump(2) + "\n", w, meta);
}

}  // namespace tokdyn::decoder
