#pragma once
// Inputs shared by the cocycle and coupling presets: layer maps read from a user's file
// (cocycle-spectra, coupling-green, coupling-margin's benchmark mode) and number-list parameters
// (sigma lists, eta and rho grids, G4's sector eigenvalues).
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn {

/// Layer maps B(l) = I + A(l) from a float64 .npy of shape [L, d, d] (C order: file[l, i, j] =
/// B(l)_ij). InputError naming the parameter and the file for a missing or unreadable file, another
/// dtype, a shape other than [L, d, d] with L >= min_layers and d >= 1, or a non-finite entry
/// (named by its index).
std::vector<Eigen::MatrixXd> read_generators_npy(const std::string& file, const std::string& param, long min_layers = 1);

/// The shape of a generators file from its .npy header alone (nothing else read): {L, d}; the same
/// InputError as read_generators_npy for a header that is not float64 [L, d, d]. For estimates.
std::pair<long, long> generators_shape(const std::string& file, const std::string& param);
/// For a preset's estimate: {L, d} of the generators file of parameter `param` when one is given
/// and its header reads, else {fallback_L, fallback_d} (a bad file is refused by the run's reader,
/// with the full reason, after the estimate).
std::pair<double, double> generators_shape_or(const Params& p, const std::string& param, double fallback_L, double fallback_d);

/// The comma-separated numbers of string parameter `key` (InputError naming it: empty list, an
/// entry that is not a finite number).
std::vector<double> number_list_param(const Params& p, const std::string& key);

/// G4's sector eigenvalues: parameters g4_m and g4_v, lists of equal length (InputError otherwise).
std::pair<std::vector<double>, std::vector<double>> g4_sector_params(const Params& p);

}  // namespace tokdyn
