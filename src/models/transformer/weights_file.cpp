// Transformer weights from a safetensors file (tensor names: include/tokdyn/models/transformer/transformer.hpp).
#include <cmath>
#include <cstring>
#include <set>
#include <utility>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/safetensors.hpp"
#include "tokdyn/models/transformer/weights_file.hpp"

namespace tokdyn::tf {

namespace {

// One tensor as doubles: F64 exactly (little-endian bytes), other float dtypes through read_float.
std::vector<double> read_tensor(const st::Tensors& ts, const std::string& name, const std::vector<std::uint64_t>& shape,
                                const std::string& file) {
  const st::TensorInfo* t = ts.find(name);
  if (!t) throw InputError(fmt::format("{}: tensor '{}' is missing; expected shape [{}]", file, name, fmt::join(shape, ", ")));
  if (t->shape != shape)
    throw InputError(fmt::format("{}: tensor '{}' has shape [{}], expected [{}]", file, name, fmt::join(t->shape, ", "),
                                 fmt::join(shape, ", ")));
  std::vector<double> out(t->numel());
  if (t->dtype == st::DType::F64) {
    const auto bytes = ts.file_of(name)->bytes(*t);
    for (std::size_t i = 0; i < out.size(); ++i) std::memcpy(&out[i], bytes.data() + 8 * i, 8);
  } else {
    const std::vector<float> f = ts.read_float(name);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = f[i];
  }
  for (double v : out)
    if (!std::isfinite(v)) throw InputError(fmt::format("{}: tensor '{}' has a non-finite value; expected finite weights", file, name));
  return out;
}

}  // namespace

int count_layers(const std::string& path) {
  const st::Tensors ts(path);
  int n = 0;
  while (ts.find(fmt::format("layers.{}.W_Q", n))) ++n;
  return n;
}

std::pair<long, long> file_dimensions(const std::string& path) {
  const st::Tensors ts(path);
  const st::TensorInfo* q = ts.find("layers.0.W_Q");
  const st::TensorInfo* w1 = ts.find("layers.0.W_1");
  if (!q) throw InputError(fmt::format("{}: no tensor 'layers.0.W_Q'; expected Transformer weights layers.{{l}}.W_Q ...", path));
  if (q->shape.size() != 2 || q->shape[0] != q->shape[1] || q->shape[0] == 0)
    throw InputError(fmt::format("{}: tensor 'layers.0.W_Q' has shape [{}]; expected [d, d]", path, fmt::join(q->shape, ", ")));
  if (!w1) throw InputError(fmt::format("{}: tensor 'layers.0.W_1' is missing; expected shape [d_ff, {}]", path, q->shape[0]));
  if (w1->shape.size() != 2 || w1->shape[0] == 0)
    throw InputError(fmt::format("{}: tensor 'layers.0.W_1' has shape [{}]; expected [d_ff, d]", path, fmt::join(w1->shape, ", ")));
  return {static_cast<long>(q->shape[0]), static_cast<long>(w1->shape[0])};
}

std::vector<LayerWeights> load_weights(const std::string& path, const Config& c) {
  c.validate();
  const st::Tensors ts(path);
  const std::string file = path;
  std::vector<LayerWeights> out;
  std::set<std::string> used;  // every tensor of the file must be one of these
  const auto d = static_cast<std::uint64_t>(c.d), f = static_cast<std::uint64_t>(c.d_ff);
  for (int l = 0; ts.find(fmt::format("layers.{}.W_Q", l)); ++l) {
    auto mat = [&](const char* n, std::uint64_t r, std::uint64_t k) {
      const auto v = read_tensor(ts, fmt::format("layers.{}.{}", l, n), {r, k}, file);
      used.insert(fmt::format("layers.{}.{}", l, n));
      Mat M(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(k));
      for (std::size_t i = 0; i < v.size(); ++i) M.data()[i] = v[i];  // row-major = C order
      return M;
    };
    auto vec = [&](const char* n, std::uint64_t r, double def, bool optional) {
      const std::string name = fmt::format("layers.{}.{}", l, n);
      if (optional && !ts.find(name)) return Vec(Vec::Constant(static_cast<Eigen::Index>(r), def));
      const auto v = read_tensor(ts, name, {r}, file);
      used.insert(name);
      return Vec(Eigen::Map<const Vec>(v.data(), static_cast<Eigen::Index>(r)));
    };
    LayerWeights W;
    W.W_Q = mat("W_Q", d, d);
    W.W_K = mat("W_K", d, d);
    W.W_V = mat("W_V", d, d);
    W.W_1 = mat("W_1", f, d);
    W.W_2 = mat("W_2", d, f);
    W.b_1 = vec("b_1", f, 0.0, false);
    W.b_2 = vec("b_2", d, 0.0, false);
    W.g_attn = vec("g_attn", d, 1.0, true);
    W.beta_attn = vec("beta_attn", d, 0.0, true);
    W.g_mlp = vec("g_mlp", d, 1.0, true);
    W.beta_mlp = vec("beta_mlp", d, 0.0, true);
    out.push_back(std::move(W));
  }
  if (out.empty()) throw InputError(fmt::format("{}: no tensor 'layers.0.W_Q'; expected Transformer weights layers.{{l}}.W_Q ...", file));
  // Every tensor accounted for: a misspelt or foreign tensor (layers.0.g_atn, layers.0.W_O, a gap in
  // the layer numbers) is refused, not ignored.
  for (const std::string& name : ts.names())
    if (!used.count(name))
      throw InputError(fmt::format("{}: tensor '{}' is not a weight of this Transformer; expected only layers.{{l}}.W_Q, W_K, W_V, "
                                   "W_1, W_2, b_1, b_2 and the optional g_attn, beta_attn, g_mlp, beta_mlp for l = 0..{} "
                                   "(docs/transformer-weights.md)",
                                   file, name, out.size() - 1));
  return out;
}

}  // namespace tokdyn::tf
