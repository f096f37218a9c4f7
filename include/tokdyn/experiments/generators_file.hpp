#pragma once
// Layer maps read from a user's file, shared by the cocycle presets (cocycle-spectra,
// coupling-green, coupling-margin's benchmark mode).
#include <string>
#include <vector>

#include <Eigen/Dense>

namespace tokdyn {

/// Layer maps B(l) = I + A(l) from a float64 .npy of shape [L, d, d] (C order: file[l, i, j] =
/// B(l)_ij). InputError naming the parameter and the file for a missing or unreadable file, another
/// dtype, a shape other than [L, d, d] with L >= min_layers and d >= 1, or a non-finite entry
/// (named by its index).
std::vector<Eigen::MatrixXd> read_generators_npy(const std::string& file, const std::string& param, long min_layers = 1);

}  // namespace tokdyn
