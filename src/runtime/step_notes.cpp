// How a guarded fixed-step run is reported: manifest.json's "step_check" and the note printed
// when a step was refined.
#include <fmt/format.h>

#include "tokdyn/runtime/experiment.hpp"

namespace tokdyn {

nlohmann::json step_report_json(const StepReport& r, StepPolicy policy) {
  nlohmann::json j = nlohmann::json::object();
  j["method"] = r.method;
  j["policy"] = policy == StepPolicy::Refuse ? "refuse" : policy == StepPolicy::Refine ? "refine" : "off";
  j["h_requested"] = r.h_requested;
  j["h_used_min"] = r.h_min;
  j["h_used_max"] = r.h_max;
  j["max_local_rate"] = r.max_rate;
  j["max_h_rate"] = r.max_h_rate;
  j["max_stage_h_rate"] = r.max_stage_h_rate;  // per-step trigger: step x |k3 - k2| / |Y3 - Y2|
  j["bound_h_rate"] = r.limit;
  j["inside"] = r.max_h_rate <= r.limit;
  j["checks"] = r.checks;
  j["steps"] = r.steps;
  j["refined_steps"] = r.refined_steps;
  j["action"] = r.refined() ? "refined" : "accepted";
  j["rate_estimate"] = "power iteration on the field's Jacobian-vector products (tangential on the spheres), per run, "
                       "max over runs and checks";
  return j;
}

std::string step_refined_note(const StepReport& r, const std::string& param) {
  return fmt::format(
      "parameter '{}' = {}: {} step refined for stability: the local rate reached {:.4g} (step x rate must stay <= {}); "
      "{} of {} steps used a halved step, the smallest {:.3g} (see manifest.json notes.step_check)",
      param, r.h_requested, r.method, r.max_rate, r.limit, r.refined_steps, r.steps, r.h_min);
}

}  // namespace tokdyn
