#pragma once
// The one error type for bad user input (config, CLI, checkpoint). The CLI prints the message on
// one line and exits with code 2. The message names the input and says what was expected.
#include <stdexcept>
#include <string>

namespace tokdyn {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tokdyn
