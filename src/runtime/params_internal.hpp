#pragma once
// Helpers shared by the parameter layer's translation units (src/runtime/params*.cpp): the bounds
// and list formatting of params.cpp, and the parsing of one value (params_values.cpp) that the
// resolution of a run's parameters (params_resolve.cpp) calls. Internal to src/runtime (not
// installed); declared in tokdyn::params_detail and defined once, so that no helper is defined twice
// in the library or in a unity batch.
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn::params_detail {

// Formatting (params.cpp).
std::string num(double v, bool integer);
std::string bounds_text(const ParamSpec& s, bool integer);
bool in_bounds(const ParamSpec& s, double v);
std::string join(const std::vector<std::string>& parts, const char* sep);

// Values (params_values.cpp).
// Where a value came from, for messages: "" (command line) or "config file 'x.toml' line 3: ".
struct Origin {
  std::string prefix;
};

// Parses a `--set` value for spec `s`.
ParamValue value_of_string(const ParamSpec& s, const std::string& raw);
ParamValue value_of_toml(const Origin& o, const ParamSpec& s, const toml::node& n);
// How a TOML value is shown in messages.
std::string describe(const toml::node& n);
// A scalar TOML value as it may be written back in a file (for a hint that rewrites its line);
// "..." for an array, a table or a date.
std::string toml_text(const toml::node& n);

}  // namespace tokdyn::params_detail
