// Mamba-2 checkpoint weights: model.safetensors (single or sharded) read into a Model, and a
// Model written in the reference layout (see models/mamba2/checkpoint.hpp).
#include "tokdyn/models/mamba2/checkpoint.hpp"

#include <fstream>
#include <map>
#include <set>
#include <unistd.h>

#include <fmt/format.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/io/safetensors.hpp"

namespace fs = std::filesystem;

namespace tokdyn::mamba2 {
// ---------------------------------------------------------------- load / save

namespace {

struct Expect {
  std::string name;
  std::vector<std::uint64_t> shape;
};

std::string shape_text(const std::vector<std::uint64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

Model load(const fs::path& path) {
  std::error_code ec;
  fs::path dir = fs::is_directory(path, ec) ? path : path.parent_path();
  if (!fs::exists(path, ec))
    throw InputError(fmt::format("{}: no such file or directory; expected a checkpoint directory (config.json + model.safetensors)",
                                 path.string()));
  const fs::path cfg_file = dir / "config.json";
  if (!fs::exists(cfg_file, ec))
    throw InputError(fmt::format("{}: missing config.json; expected it beside the checkpoint's safetensors", dir.string()));
  Model m;
  m.cfg = parse_config(cfg_file);
  m.source = fs::absolute(path, ec).string();
  const Config& c = m.cfg;

  // The weights: a .safetensors file, or the directory's model.safetensors / sharded index.
  fs::path wpath = path;
  if (fs::is_directory(path, ec)) {
    if (!fs::exists(path / "model.safetensors", ec) && !fs::exists(path / "model.safetensors.index.json", ec)) {
      for (const char* bin : {"pytorch_model.bin", "model.bin", "pytorch_model.pt"})
        if (fs::exists(path / bin, ec)) wpath = path / bin;  // the reader explains how to convert it
      if (wpath == path)
        throw InputError(fmt::format("{}: no model.safetensors or model.safetensors.index.json; expected a safetensors checkpoint",
                                     path.string()));
    }
  }
  st::Tensors T(wpath);
  const std::string what = wpath.string();

  const auto d = static_cast<std::uint64_t>(c.d_model), di = static_cast<std::uint64_t>(c.d_inner()),
             H = static_cast<std::uint64_t>(c.nheads()), cd = static_cast<std::uint64_t>(c.conv_dim()),
             K = static_cast<std::uint64_t>(c.d_conv), dip = static_cast<std::uint64_t>(c.d_in_proj()),
             V = static_cast<std::uint64_t>(c.vocab_padded());
  std::string emb_name = "backbone.embedding.weight";
  if (!T.find(emb_name) && T.find("backbone.embeddings.weight")) emb_name = "backbone.embeddings.weight";
  std::vector<Expect> expect{{emb_name, {V, d}}, {"backbone.norm_f.weight", {d}}};
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("backbone.layers.{}.", l);
    expect.push_back({p + "norm.weight", {d}});
    expect.push_back({p + "mixer.in_proj.weight", {dip, d}});
    expect.push_back({p + "mixer.conv1d.weight", {cd, 1, K}});
    expect.push_back({p + "mixer.conv1d.bias", {cd}});
    expect.push_back({p + "mixer.dt_bias", {H}});
    expect.push_back({p + "mixer.A_log", {H}});
    expect.push_back({p + "mixer.D", {H}});
    expect.push_back({p + "mixer.norm.weight", {di}});
    expect.push_back({p + "mixer.out_proj.weight", {d, di}});
  }
  std::set<std::string> expected_names;
  for (const auto& e : expect) {
    expected_names.insert(e.name);
    const st::TensorInfo* t = T.find(e.name);
    if (!t)
      throw InputError(fmt::format("{}: missing tensor '{}' (shape {}); expected a Mamba-2 checkpoint matching config.json", what,
                                   e.name, shape_text(e.shape)));
    if (t->shape != e.shape)
      throw InputError(fmt::format("{}: tensor '{}' has shape {}; config.json implies {}", what, e.name, shape_text(t->shape),
                                   shape_text(e.shape)));
  }
  for (const std::string& n : T.names()) {
    if (expected_names.count(n)) continue;
    if (n == "lm_head.weight") {
      const st::TensorInfo* t = T.find(n);
      if (t->shape != std::vector<std::uint64_t>{V, d})
        throw InputError(fmt::format("{}: tensor 'lm_head.weight' has shape {}; expected {}", what, shape_text(t->shape),
                                     shape_text({V, d})));
      continue;  // the output head plays no part in the depth dynamics
    }
    throw InputError(fmt::format("{}: unexpected tensor '{}'; expected only the Mamba-2 tensors for {} layers", what, n, c.n_layer));
  }

  // Every tensor is widened to float32: refuse a model that cannot fit this machine's memory
  // before allocating any of it (the shapes come from config.json and were checked above).
  {
    std::uint64_t floats = 0;
    for (const auto& e : expect) {
      std::uint64_t n = 1;
      for (auto x : e.shape) n *= x;  // each dimension < 2^32 (config bounds): no overflow per tensor
      floats += n;
    }
    const auto pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const std::uint64_t ram = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
    if (ram > 0 && floats > ram / 4)
      throw InputError(fmt::format("{}: the model needs {} as float32 in memory, and this machine has {} of RAM; "
                                   "expected a checkpoint that fits in memory",
                                   what, bytes_text(floats * 4), bytes_text(ram)));
  }

  auto read_mat = [&](const std::string& name, Eigen::Index rows, Eigen::Index cols) {
    MatF M(rows, cols);
    T.file_of(name)->read_float(*T.find(name), M.data());  // shapes were checked above
    for (Eigen::Index i = 0; i < M.size(); ++i)
      if (!std::isfinite(M.data()[i]))
        throw InputError(fmt::format("{}: tensor '{}' holds a non-finite value (NaN or Inf) at flat index {}; expected finite weights",
                                     what, name, i));
    return M;
  };
  auto read_vec = [&](const std::string& name, Eigen::Index n) -> VecF {
    const MatF M = read_mat(name, n, 1);
    return Eigen::Map<const VecF>(M.data(), n);
  };
  if (const auto meta = T.metadata(); meta.count("tokdyn")) m.generated_by = meta.at("tokdyn");
  m.embedding = read_mat(emb_name, static_cast<Eigen::Index>(V), c.d_model);
  m.norm_f = read_vec("backbone.norm_f.weight", c.d_model);
  m.layers.resize(static_cast<std::size_t>(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("backbone.layers.{}.", l);
    Layer& L = m.layers[static_cast<std::size_t>(l)];
    L.norm_w = read_vec(p + "norm.weight", c.d_model);
    L.in_proj = read_mat(p + "mixer.in_proj.weight", c.d_in_proj(), c.d_model);
    L.conv_w = read_mat(p + "mixer.conv1d.weight", c.conv_dim(), c.d_conv);
    L.conv_b = read_vec(p + "mixer.conv1d.bias", c.conv_dim());
    L.dt_bias = read_vec(p + "mixer.dt_bias", c.nheads());
    L.A_log = read_vec(p + "mixer.A_log", c.nheads());
    L.D = read_vec(p + "mixer.D", c.nheads());
    L.mix_norm_w = read_vec(p + "mixer.norm.weight", c.d_inner());
    L.out_proj = read_mat(p + "mixer.out_proj.weight", c.d_model, c.d_inner());
  }
  return m;
}

void save(const Model& m, const fs::path& dir) {
  const Config& c = m.cfg;
  const auto d = static_cast<std::uint64_t>(c.d_model), di = static_cast<std::uint64_t>(c.d_inner()),
             H = static_cast<std::uint64_t>(c.nheads()), cd = static_cast<std::uint64_t>(c.conv_dim()),
             K = static_cast<std::uint64_t>(c.d_conv), dip = static_cast<std::uint64_t>(c.d_in_proj()),
             V = static_cast<std::uint64_t>(c.vocab_padded());
  using st::DType;
  std::vector<st::TensorToWrite> w;
  w.push_back({"backbone.embedding.weight", DType::F16, {V, d}, m.embedding.data()});
  w.push_back({"backbone.norm_f.weight", DType::F16, {d}, m.norm_f.data()});
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("backbone.layers.{}.", l);
    const Layer& L = m.layers[static_cast<std::size_t>(l)];
    w.push_back({p + "norm.weight", DType::F16, {d}, L.norm_w.data()});
    w.push_back({p + "mixer.in_proj.weight", DType::F16, {dip, d}, L.in_proj.data()});
    w.push_back({p + "mixer.conv1d.weight", DType::F16, {cd, 1, K}, L.conv_w.data()});
    w.push_back({p + "mixer.conv1d.bias", DType::F16, {cd}, L.conv_b.data()});
    w.push_back({p + "mixer.dt_bias", DType::F32, {H}, L.dt_bias.data()});
    w.push_back({p + "mixer.A_log", DType::F32, {H}, L.A_log.data()});
    w.push_back({p + "mixer.D", DType::F32, {H}, L.D.data()});
    w.push_back({p + "mixer.norm.weight", DType::F16, {di}, L.mix_norm_w.data()});
    w.push_back({p + "mixer.out_proj.weight", DType::F16, {d, di}, L.out_proj.data()});
  }
  std::map<std::string, std::string> meta{{"format", "pt"}};
  if (!m.generated_by.empty()) meta["tokdyn"] = m.generated_by;
  st::write_checkpoint_dir(dir, c.to_json().dump(1) + "\n", w, meta);
}

}  // namespace tokdyn::mamba2
