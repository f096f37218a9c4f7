#pragma once
// Tokens: the state of a sequence model at one depth. One row per token (Eigen, row-major).
// A batch of runs is a stack of equally long sequences: rows [r*len, (r+1)*len) are run r.
#include <Eigen/Dense>
#include <cstddef>

namespace tokdyn {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::VectorXd;
using RowVec = Eigen::RowVectorXd;
using Tokens = Mat;

/// A stack of `runs` sequences of `len` tokens each, stored in one matrix of scalar S: double for
/// every model by default (Batch), float for models computed in fp32 (BatchF: Mamba-2).
template <class S>
struct BasicBatch {
  using Scalar = S;
  using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Matrix Z;          ///< (runs*len) x d
  int runs = 1;      ///< number of sequences
  int len = 0;       ///< tokens per sequence
  int dim() const { return static_cast<int>(Z.cols()); }
  auto run(int r) { return Z.middleRows(static_cast<Eigen::Index>(r) * len, len); }
  auto run(int r) const { return Z.middleRows(static_cast<Eigen::Index>(r) * len, len); }
};
using Batch = BasicBatch<double>;
using BatchF = BasicBatch<float>;

}  // namespace tokdyn
