// tokdyn._core's presets and runs (see module.cpp): the presets with their descriptions, a
// preset's parameter schema as JSON, and a run of a preset into an output folder (the GIL released
// while it runs; Ctrl-C stops it and raises KeyboardInterrupt, module_interrupt.hpp).
#include "module_internal.hpp"
#include "module_interrupt.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/outputs.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/suggest.hpp"

namespace tokdyn::python {
namespace {

const Experiment& preset_named(const std::string& name) {
  if (const Experiment* e = find_experiment(name)) return *e;
  std::vector<std::string> names;
  for (const Experiment* e : experiments()) names.push_back(e->name);
  const std::string guess = closest_name(name, names);
  throw InputError(fmt::format("preset '{}': unknown{}; expected one of {} (tokdyn.presets())", name,
                               guess.empty() ? std::string() : " (did you mean '" + guess + "'?)", fmt::join(names, ", ")));
}

// ---- presets ----

std::vector<std::pair<std::string, std::string>> list_presets() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Experiment* e : experiments()) out.emplace_back(e->name, e->description);
  return out;
}

std::string show_json(const std::string& name) { return schema_json(preset_named(name)).dump(); }

py::dict run_preset(const std::string& name, const std::string& out, const std::map<std::string, std::string>& sets,
                    int threads, bool figures, bool overwrite, bool inputs) {
  const Experiment& e = preset_named(name);
  const std::vector<std::pair<std::string, std::string>> v(sets.begin(), sets.end());
  const Params P = resolve_params(e, v);
  if (threads < 1) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The same preset with the signal watch as its progress function (every preset reports progress
  // through RunContext::progress from the thread that runs it), checked again as the run starts and
  // after it computed: an interrupt before the results are complete publishes nothing.
  SignalWatch watch;
  Experiment watched = e;
  watched.run = [&e, &watch](const Params& p, RunContext& ctx) {
    ctx.progress = watch.hook(std::move(ctx.progress));
    watch.poll(/*now=*/true);
    e.run(p, ctx);
    watch.poll(/*now=*/true);
  };
  const RunOutcome r = watch.run([&] {
    py::gil_scoped_release release;
    return run_experiment(watched, P, out, threads, figures, /*show_progress=*/false, overwrite, inputs);
  });
  py::dict d;
  d["dir"] = r.dir.string();
  d["files"] = r.files;
  d["replaced"] = r.replaced;
  d["checks_line"] = r.checks_line;
  d["figure_error"] = r.figure_error;
  return d;
}

}  // namespace

void bind_runs(py::module_& mod) {
  mod.def("presets", &list_presets);
  mod.def("show_json", &show_json, py::arg("preset"));
  mod.def("run", &run_preset, py::arg("preset"), py::arg("out"), py::arg("sets"), py::arg("threads"), py::arg("figures"),
          py::arg("overwrite"), py::arg("inputs"));
}

}  // namespace tokdyn::python
