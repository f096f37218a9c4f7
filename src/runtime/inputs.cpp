// Random inputs written beside a run's results (see the header).
#include "tokdyn/runtime/inputs.hpp"

#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/analysis/closed_loop.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/io/safetensors.hpp"
#include "tokdyn/models/transformer/transformer.hpp"

namespace tokdyn {

namespace {

/// Records the entry in notes.inputs and says whether the file is to be written.
bool declare_input(RunContext& ctx, const std::string& file, const std::vector<std::size_t>& shape, double bytes,
                   const std::string& what) {
  nlohmann::json e = {{"what", what}, {"shape", shape}, {"bytes", bytes}};
  const bool write = ctx.write_inputs || bytes <= kInputsAutoBytes;
  e["written"] = write;
  if (!write)
    e["not_written"] = fmt::format("{:.1f} MiB is above the {:.0f} MiB written by default: rerun with --inputs to write it",
                                   bytes / 1048576.0, kInputsAutoBytes / 1048576.0);
  ctx.notes["inputs"]["inputs/" + file] = e;
  if (write) std::filesystem::create_directories(ctx.dir / "inputs");
  return write;
}

/// Column-major Eigen data in C (row-major) order, appended to `out`.
void append_row_major(const Eigen::MatrixXd& m, std::vector<double>& out) {
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) out.push_back(m(i, j));
}

}  // namespace

void write_input_stack(RunContext& ctx, const std::string& file, const std::vector<Eigen::MatrixXd>& mats, const std::string& what) {
  const std::size_t L = mats.size();
  const std::size_t r = L ? static_cast<std::size_t>(mats[0].rows()) : 0, c = L ? static_cast<std::size_t>(mats[0].cols()) : 0;
  if (!declare_input(ctx, file, {L, r, c}, 8.0 * static_cast<double>(L * r * c), what)) return;
  std::vector<double> data;
  data.reserve(L * r * c);
  for (const auto& m : mats) append_row_major(m, data);
  write_npy(ctx.dir / "inputs" / file, data.data(), {L, r, c});
}

void write_input_matrix(RunContext& ctx, const std::string& file, const Eigen::MatrixXd& m, const std::string& what) {
  const std::size_t r = static_cast<std::size_t>(m.rows()), c = static_cast<std::size_t>(m.cols());
  if (!declare_input(ctx, file, {r, c}, 8.0 * static_cast<double>(r * c), what)) return;
  std::vector<double> data;
  append_row_major(m, data);
  write_npy(ctx.dir / "inputs" / file, data.data(), {r, c});
}

void write_input_vector(RunContext& ctx, const std::string& file, const Eigen::VectorXd& v, const std::string& what) {
  const std::size_t n = static_cast<std::size_t>(v.size());
  if (!declare_input(ctx, file, {n}, 8.0 * static_cast<double>(n), what)) return;
  write_npy(ctx.dir / "inputs" / file, v.data(), {n});
}

bool write_input_ids(RunContext& ctx, const std::string& file, const std::vector<std::int64_t>& ids, const std::vector<std::size_t>& shape,
                     const std::string& what) {
  std::size_t n = 1;
  for (std::size_t s : shape) n *= s;
  if (n != ids.size()) throw std::logic_error(fmt::format("write_input_ids: {} ids for a shape of {} entries", ids.size(), n));
  if (!declare_input(ctx, file, shape, 8.0 * static_cast<double>(n), what)) return false;
  write_npy(ctx.dir / "inputs" / file, ids.data(), shape);
  return true;
}

void write_input_injection(RunContext& ctx, const std::string& prefix, const closed_loop::Injection& psi, const std::string& what) {
  for (const auto& [name, mats] : psi.parameters()) {
    const std::string file = fmt::format("{}_{}.npy", prefix, name);
    const std::string w = fmt::format("{}: {} of psi = {} ", what, name, psi.name());
    if (mats.size() == 1 && mats[0].cols() == 1)
      write_input_vector(ctx, file, mats[0].col(0), w + "(vector)");
    else if (mats.size() == 1)
      write_input_matrix(ctx, file, mats[0], w + "(matrix)");
    else
      write_input_stack(ctx, file, mats, w + "(one matrix per layer, [L, d, d])");
  }
}

void write_input_transformer(RunContext& ctx, const std::string& file, const std::vector<tf::LayerWeights>& sets, const std::string& what) {
  // Row-major copies of every tensor (Eigen stores column-major), named as load_weights reads them.
  std::vector<std::vector<double>> buffers;
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> meta;
  double bytes = 0.0;
  for (std::size_t l = 0; l < sets.size(); ++l) {
    const tf::LayerWeights& W = sets[l];
    auto mat = [&](const char* name, const Eigen::MatrixXd& m) {
      buffers.emplace_back();
      append_row_major(m, buffers.back());
      meta.push_back({fmt::format("layers.{}.{}", l, name), {static_cast<std::uint64_t>(m.rows()), static_cast<std::uint64_t>(m.cols())}});
      bytes += 8.0 * static_cast<double>(m.size());
    };
    auto vec = [&](const char* name, const Eigen::VectorXd& v) {
      if (v.size() == 0) return;
      buffers.emplace_back(v.data(), v.data() + v.size());
      meta.push_back({fmt::format("layers.{}.{}", l, name), {static_cast<std::uint64_t>(v.size())}});
      bytes += 8.0 * static_cast<double>(v.size());
    };
    mat("W_Q", W.W_Q), mat("W_K", W.W_K), mat("W_V", W.W_V), mat("W_1", W.W_1), mat("W_2", W.W_2);
    vec("b_1", W.b_1), vec("b_2", W.b_2), vec("g_attn", W.g_attn), vec("beta_attn", W.beta_attn), vec("g_mlp", W.g_mlp),
        vec("beta_mlp", W.beta_mlp);
  }
  if (!declare_input(ctx, file, {sets.size()}, bytes, what)) return;
  std::vector<st::TensorToWrite> ts;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    st::TensorToWrite t{meta[i].first, st::DType::F64, meta[i].second};
    t.data64 = buffers[i].data();
    ts.push_back(std::move(t));
  }
  st::write_file(ctx.dir / "inputs" / file, ts, {{"format", "tokdyn transformer weights (docs/transformer-weights.md)"}});
}

}  // namespace tokdyn
