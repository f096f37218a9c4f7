#include "tokdyn/experiments/generators_file.hpp"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>

#include "tokdyn/analysis/cocycle_families.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/io/npy.hpp"

namespace tokdyn {

std::pair<long, long> generators_shape(const std::string& file, const std::string& param) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("parameter '{}' ({}): cannot open the file; expected a readable float64 .npy", param, file));
  std::vector<unsigned char> head(70000);
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  const auto n = static_cast<std::size_t>(in.gcount());
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  const npy::Header h = npy::parse_header(head.data(), n, ec ? n : size, fmt::format("parameter '{}' ({})", param, file));
  if (h.kind != 'f' || h.item_size != 8 || h.shape.size() != 3 || h.shape[0] < 1 || h.shape[1] < 1 || h.shape[1] != h.shape[2])
    throw InputError(fmt::format("parameter '{}' ({}): expected a float64 .npy of shape [L, d, d] (layer maps I + A(l))", param, file));
  return {static_cast<long>(h.shape[0]), static_cast<long>(h.shape[1])};
}

std::vector<Eigen::MatrixXd> read_generators_npy(const std::string& file, const std::string& param, long min_layers) {
  std::vector<std::size_t> shape;
  const std::vector<double> v = read_npy_double(file, shape, std::uint64_t(1) << 28);
  if (shape.size() != 3 || static_cast<long>(shape[0]) < min_layers || shape[1] < 1 || shape[1] != shape[2]) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    throw InputError(fmt::format("parameter '{}' ({}): generators have shape {}); expected [L, d, d] with L >= {}, d >= 1 (layer maps I + A(l))",
                                 param, file, s, min_layers));
  }
  const long L = static_cast<long>(shape[0]), d = static_cast<long>(shape[1]);
  std::vector<Eigen::MatrixXd> B(static_cast<std::size_t>(L), Eigen::MatrixXd(d, d));
  for (long l = 0; l < L; ++l)
    for (long i = 0; i < d; ++i)
      for (long j = 0; j < d; ++j) {
        const double x = v[static_cast<std::size_t>((l * d + i) * d + j)];
        if (!std::isfinite(x))
          throw InputError(fmt::format("parameter '{}' ({}): generators[{}, {}, {}] = {}; expected finite values", param, file, l, i, j, x));
        B[static_cast<std::size_t>(l)](i, j) = x;
      }
  return B;
}

std::pair<double, double> generators_shape_or(const Params& p, const std::string& param, double fallback_L, double fallback_d) {
  const std::string& file = p.get_string(param);
  if (file.empty()) return {fallback_L, fallback_d};
  try {
    const auto [L, d] = generators_shape(file, param);
    return {static_cast<double>(L), static_cast<double>(d)};
  } catch (const InputError&) {
    return {fallback_L, fallback_d};  // not a generators file: the run's reader refuses it with the full reason
  }
}

std::vector<double> number_list_param(const Params& p, const std::string& key) { return p.get_double_list(key); }

std::pair<std::vector<double>, std::vector<double>> g4_sector_params(const Params& p) {
  auto m = number_list_param(p, "g4_m"), v = number_list_param(p, "g4_v");
  if (m.size() != v.size())
    throw InputError(fmt::format("parameters 'g4_m' and 'g4_v': {} and {} values; expected as many", m.size(), v.size()));
  return {std::move(m), std::move(v)};
}

}  // namespace tokdyn
