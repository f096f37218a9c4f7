#pragma once
// coupling-e6's schema (coupling_e6_schema.cpp): its parameters and its declared outputs; the run and
// the registration are in coupling_e6.cpp.
#include <vector>

#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn {
namespace coupling_e6 {

std::vector<ParamSpec> e6_params();
OutputDecl e6_outputs();

}  // namespace coupling_e6
}  // namespace tokdyn
