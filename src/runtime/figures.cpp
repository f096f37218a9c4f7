// Figures: `python/plot.py KIND DIR` (an installed tokdyn's P/share/tokdyn/python/plot.py:
// python_paths(), child_jobs.hpp) in a child process of its own process group, with a private
// temporary folder (`$TMPDIR/tokdyn-plot-XXXXXX`: its stderr and matplotlib's cache) that is
// removed afterwards and on interrupt; an interrupt also stops the child.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/core/interrupt.hpp"
#include "tokdyn/runtime/child_jobs.hpp"

namespace tokdyn {

namespace fs = std::filesystem;

namespace {

fs::path temp_root() {
  const char* t = std::getenv("TMPDIR");
  std::error_code ec;
  if (t && *t && fs::is_directory(t, ec)) return t;
  return "/tmp";
}

}  // namespace

namespace {
FigureOptions g_figure_options;
}  // namespace

void set_figure_options(FigureOptions o) { g_figure_options = std::move(o); }
const FigureOptions& figure_options() { return g_figure_options; }

std::vector<std::string> parse_figure_formats(const std::string& option, const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string f = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (f != "png" && f != "svg" && f != "pdf")
      throw InputError(fmt::format("{}: expected a comma-separated list of png, svg, pdf; got '{}'", option, f));
    if (std::find(out.begin(), out.end(), f) != out.end())
      throw InputError(fmt::format("{}: '{}' is listed twice; give each format once", option, f));
    out.push_back(f);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

nlohmann::json draw_figures(const std::string& kind, const fs::path& dir) {
  const char* py_env = std::getenv("TOKDYN_PYTHON");
  const char* script_env = std::getenv("TOKDYN_PLOT_SCRIPT");
  const std::string python = (py_env && *py_env) ? py_env : "/usr/bin/python3";
  const std::string script = (script_env && *script_env) ? script_env : (python_paths().sources / "plot.py").string();
  const std::string dir_s = dir.string();
  const std::string fail = fmt::format("figure '{}' failed: ", kind);

  std::string tmpl = (temp_root() / "tokdyn-plot-XXXXXX").string();
  if (!::mkdtemp(tmpl.data()))
    throw std::runtime_error(fail + fmt::format("cannot create a folder in {}: {}", temp_root().string(), std::strerror(errno)));
  const fs::path work = tmpl;
  interrupt::PathGuard guard(work);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{work};
  // The child: the parent's environment with MPLBACKEND=Agg and matplotlib's cache in our folder,
  // in its own process group (a terminal's Ctrl-C reaches tokdyn, which stops it).
  ChildJob job;
  job.argv = {python, script, kind, dir_s};
  job.env = {"MPLBACKEND=Agg", "MPLCONFIGDIR=" + (work / "mpl").string(),
             "TOKDYN_PLOT_VERSIONS=" + (work / "versions.json").string(),
             fmt::format("TOKDYN_FIGURE_FORMATS={}", fmt::join(g_figure_options.formats, ","))};
  if (g_figure_options.dpi > 0) job.env.push_back(fmt::format("TOKDYN_FIGURE_DPI={}", g_figure_options.dpi));
  job.stderr_file = work / "stderr.txt";
  ChildExit ex;
  try {
    ex = run_child(job);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fail + e.what());
  }
  if (ex.ok()) {
    try {  // written by the script (tokdyn_plot.main); absent from an older or a user's script
      return nlohmann::json::parse(read_regular_file(work / "versions.json", 1 << 16, "versions.json"));
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  const std::string why = ex.signal ? fmt::format("killed by signal {}", ex.signal) : fmt::format("exit status {}", ex.code);
  throw std::runtime_error(fail + (ex.last_line.empty() ? why : ex.last_line));
}

}  // namespace tokdyn
