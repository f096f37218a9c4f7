// The test binary's main: OpenBLAS's own kernels first (blas_core.hpp, as the tokdyn binary does,
// so that in-process results and the CLI's have the same bits), then GoogleTest.
#include <gtest/gtest.h>

#include "tokdyn/core/blas_core.hpp"

int main(int argc, char** argv) {
  tokdyn::ensure_blas_core(argv);
  tokdyn::keep_freed_memory();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
