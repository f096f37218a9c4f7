#pragma once
// Facts of the machine and the moment a result records (manifest.json of a run and of a sweep).
#include <string>

namespace tokdyn {

/// The current UTC time as ISO 8601, e.g. "2026-12-02T11:44:01Z".
std::string utc_now_iso8601();
/// This machine's host name ("unknown" when it cannot be read).
std::string host_name();

}  // namespace tokdyn
