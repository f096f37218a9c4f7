// The experiment registry: presets register at static-initialisation time; structural mistakes in
// a schema (no name, duplicate keys, integers without bounds) fail loudly at start-up.
#include <algorithm>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/suggest.hpp"

namespace tokdyn {

// ---------------------------------------------------------------------------------------------
// Registry

namespace {

std::vector<std::unique_ptr<Experiment>>& registry() {
  static std::vector<std::unique_ptr<Experiment>> r;  // function-local: no static-init order issue
  return r;
}

std::size_t index_of(ParamType t) {
  switch (t) {
    case ParamType::Int: return 0;
    case ParamType::Double: return 1;
    case ParamType::Bool: return 2;
    case ParamType::String: return 3;
    case ParamType::IntList: return 4;
    case ParamType::DoubleList: return 5;
  }
  return 6;
}

}  // namespace

ExperimentRegistration::ExperimentRegistration(Experiment e) {
  // Structural mistakes in a schema are programming errors: fail loudly at start-up.
  if (e.name.empty()) throw std::logic_error("experiment registered without a name");
  if (find_experiment(e.name)) throw std::logic_error(fmt::format("experiment '{}' registered twice", e.name));
  if (!e.run) throw std::logic_error(fmt::format("experiment '{}' has no run function", e.name));
  for (std::size_t i = 0; i < e.params.size(); ++i) {
    const ParamSpec& s = e.params[i];
    if (s.key.empty() || s.key == "preset" || s.key.find('=') != std::string::npos)
      throw std::logic_error(fmt::format("experiment '{}': invalid parameter key '{}'", e.name, s.key));
    if ((s.type == ParamType::Int || s.type == ParamType::IntList) && (!s.min || !s.max || *s.max > kMaxSeed))
      throw std::logic_error(
          fmt::format("experiment '{}': integer parameter '{}' needs a lower and an upper bound (<= 2^53)", e.name, s.key));
    if (s.def.index() != index_of(s.type))
      throw std::logic_error(fmt::format("experiment '{}': default of '{}' does not match its type", e.name, s.key));
    for (std::size_t j = 0; j < i; ++j)
      if (e.params[j].key == s.key)
        throw std::logic_error(fmt::format("experiment '{}': parameter '{}' declared twice", e.name, s.key));
  }
  for (const ParamSpec& s : e.params) {
    for (const ParamCondition& c : s.only_when) {
      bool known = false;
      for (const ParamSpec& t : e.params) known = known || (t.key == c.key && t.key != s.key);
      if (!known || c.values.empty())
        throw std::logic_error(fmt::format("experiment '{}': parameter '{}' depends on unknown parameter '{}'", e.name,
                                           s.key, c.key));
    }
    if (s.path != PathKind::None && s.type != ParamType::String)
      throw std::logic_error(fmt::format("experiment '{}': path parameter '{}' is not a string", e.name, s.key));
  }
  for (const auto& [k, v] : e.smoke) {
    bool known = false;
    for (const ParamSpec& t : e.params) known = known || t.key == k;
    if (!known) throw std::logic_error(fmt::format("experiment '{}': smoke parameter '{}' is not in the schema", e.name, k));
  }
  for (std::size_t i = 0; i < e.renamed.size(); ++i) {
    const auto& [from, to] = e.renamed[i];
    bool old_known = false, new_known = false;
    for (const ParamSpec& t : e.params) {
      old_known = old_known || t.key == from;
      new_known = new_known || t.key == to;
    }
    if (from.empty() || from == "preset" || old_known || !new_known)
      throw std::logic_error(fmt::format("experiment '{}': renamed key '{}' -> '{}': the old name must not be a parameter and the new "
                                         "one must be", e.name, from, to));
    for (std::size_t j = 0; j < i; ++j)
      if (e.renamed[j].first == from)
        throw std::logic_error(fmt::format("experiment '{}': renamed key '{}' declared twice", e.name, from));
  }
  registry().push_back(std::make_unique<Experiment>(std::move(e)));
}

std::vector<const Experiment*> experiments() {
  std::vector<const Experiment*> out;
  for (const auto& e : registry()) out.push_back(e.get());
  std::sort(out.begin(), out.end(), [](const Experiment* a, const Experiment* b) { return a->name < b->name; });
  return out;
}

const Experiment* find_experiment(const std::string& name) {
  for (const auto& e : registry())
    if (e->name == name) return e.get();
  return nullptr;
}

std::string unknown_preset_message(const std::string& name) {
  std::vector<std::string> names;
  for (const Experiment* e : experiments()) names.push_back(e->name);
  return fmt::format("unknown preset '{}' (see `tokdyn presets`){}", name, did_you_mean(name, names));
}

}  // namespace tokdyn
