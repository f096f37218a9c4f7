#pragma once
// Numeric constants shared by the whole tree (one definition, so that files compiled together in a
// unity batch do not each bring their own).
#include <limits>
#include <numbers>

namespace tokdyn {

inline constexpr double kPi = std::numbers::pi;
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace tokdyn
