#pragma once
// Shared by the input reader tests (test_input_readers_*.cpp): the InputError message of a call,
// and a small state-spaces config.json body.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "tokdyn/core/error.hpp"

namespace tokdyn::testing::input_readers {

/// The InputError message of `fn` (or a failure when it does not throw one).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  }
  ADD_FAILURE() << "accepted";
  return {};
}

inline const std::string kSsSmall = R"("d_model": 64, "n_layer": 2, "vocab_size": 1000)";

}  // namespace tokdyn::testing::input_readers
