#pragma once
// The inputs a run drew at random (weight matrices, generators, injections), written so that
// anyone can recompute its numbers with another tool (issue 17): inputs/<file> in the results
// folder, float64 .npy in C order (a stack of L matrices is [L, rows, cols]) or, for Transformer
// weights, a safetensors file in the layout of docs/transformer-weights.md with F64 tensors (the
// same bits: `--set weights=inputs/tf_weights.safetensors` reruns on them). Each file is listed
// in manifest.json under notes.inputs with what it holds. Token ids (sampled sequences) are int64
// .npy ([sequences, tokens]). A file larger than kInputsAutoBytes is
// written only when the run asks for it (`tokdyn run ... --inputs`); otherwise its entry says so.
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn {
namespace tf {
struct LayerWeights;
}
namespace closed_loop {
class Injection;
}

inline constexpr double kInputsAutoBytes = 16.0 * 1024.0 * 1024.0;

/// A stack of equally shaped matrices as inputs/<file> ([L, rows, cols]).
void write_input_stack(RunContext& ctx, const std::string& file, const std::vector<Eigen::MatrixXd>& mats, const std::string& what);
/// One matrix ([rows, cols]) or vector ([n]).
void write_input_matrix(RunContext& ctx, const std::string& file, const Eigen::MatrixXd& m, const std::string& what);
void write_input_vector(RunContext& ctx, const std::string& file, const Eigen::VectorXd& v, const std::string& what);
/// Integer ids, C order, as an int64 .npy of `shape` (e.g. [sequences, tokens] of sampled token
/// ids). Returns whether the file was written (false: above kInputsAutoBytes without --inputs).
bool write_input_ids(RunContext& ctx, const std::string& file, const std::vector<std::int64_t>& ids, const std::vector<std::size_t>& shape,
                     const std::string& what);
/// An injection psi's defining tensors (Injection::parameters()) as inputs/<prefix>_<name>.npy.
void write_input_injection(RunContext& ctx, const std::string& prefix, const closed_loop::Injection& psi, const std::string& what);
/// Transformer weight sets as inputs/<file> (safetensors, layers.{l}.* in F64).
void write_input_transformer(RunContext& ctx, const std::string& file, const std::vector<tf::LayerWeights>& sets, const std::string& what);

}  // namespace tokdyn
