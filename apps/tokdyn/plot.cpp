// `tokdyn plot DIR [--figure-format F] [--dpi N]` (plot.hpp): a run's figures drawn again.
#include "plot.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tokdyn/core/error.hpp"
#include "tokdyn/core/host.hpp"
#include "tokdyn/io/file.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/output_folder.hpp"

namespace tokdyn::plot_cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool is_figure(const fs::path& p) {
  const std::string e = p.extension().string();
  return e == ".png" || e == ".svg" || e == ".pdf";
}

/// Every file under `dir`, relative, sorted (as the manifest lists them).
std::vector<std::string> files_of(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) out.push_back(it->path().lexically_relative(dir).generic_string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int run(const std::string& dir_text) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir = fs::path(dir_text).lexically_normal();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(fmt::format("plot: '{}' is not a folder; expected a run's results folder", dir_text));
  json m;
  try {
    m = json::parse(read_regular_file(dir / "manifest.json", std::uint64_t{64} << 20, "manifest.json"));
  } catch (const InputError&) {
    throw InputError(fmt::format("plot: '{}' has no readable manifest.json; expected a run's results folder", dir_text));
  } catch (const json::exception&) {
    throw InputError(fmt::format("plot: '{}/manifest.json' is not valid JSON; expected a run's manifest", dir_text));
  }
  if (m.value("kind", "") == "tokdyn-sweep")
    throw InputError(fmt::format("plot: '{}' is a sweep; its figures are drawn by `tokdyn sweep ... --plot` (rerun it: complete points "
                                 "are reused), a point's by `tokdyn plot DIR/points/HASH`", dir_text));
  if (!m.is_object() || !m.contains("preset") || !m["preset"].is_string() || !m.contains("files"))
    throw InputError(fmt::format("plot: '{}/manifest.json' is not a run's manifest (no preset or files)", dir_text));
  const std::string preset = m["preset"].get<std::string>();
  const Experiment* e = find_experiment(preset);
  if (!e) throw InputError(fmt::format("plot: '{}': {}", dir_text, unknown_preset_message(preset)));
  if (e->figure_kind.empty()) throw InputError(fmt::format("plot: '{}': preset {} draws no figures", dir_text, preset));
  // The run's folder, replaced atomically by a copy with the figures drawn again (only a complete
  // tokdyn result is accepted: OutputFolder refuses anything else).
  OutputFolder folder(dir, /*overwrite=*/true, "plot");
  const fs::path tmp = folder.tmp();
  fs::remove(tmp / ".tokdyn-temporary", ec);
  for (const std::string& rel : files_of(dir)) {
    if (is_figure(rel)) continue;
    fs::create_directories((tmp / rel).parent_path(), ec);
    fs::create_hard_link(dir / rel, tmp / rel, ec);  // the results themselves are not touched
    if (ec) {
      ec.clear();
      fs::copy_file(dir / rel, tmp / rel, ec);
      if (ec) throw ResourceError(fmt::format("plot: cannot copy '{}' ({})", (dir / rel).string(), ec.message()));
    }
  }
  // Hard links share the manifest's inode with the published run: write a new file, not into it.
  fs::remove(tmp / "manifest.json", ec);
  json versions;
  try {
    versions = draw_figures(e->figure_kind, tmp);
  } catch (const std::runtime_error& err) {
    std::fflush(stdout);
    std::fprintf(stderr, "tokdyn: plot: %s (the run in '%s' is unchanged)\n", message_line(err.what()).c_str(),
                 message_line(dir_text).c_str());
    return exit_code::figures_failed;  // `folder` removes its temporary copy
  }
  std::vector<std::string> files = files_of(tmp);
  files.erase(std::remove(files.begin(), files.end(), "manifest.json"), files.end());
  m["files"] = files;
  if (!versions.is_null()) m["versions"]["plotting"] = versions;
  m.erase("figure_error");
  m["figures_redrawn"] = {{"formats", figure_options().formats}, {"dpi", figure_options().dpi > 0 ? json(figure_options().dpi) : json(nullptr)},
                          {"utc", utc_now_iso8601()}};
  write_text_file(tmp / "manifest.json", m.dump(2) + "\n");
  folder.commit();
  long n = 0;
  for (const std::string& f : files) n += is_figure(f) ? 1 : 0;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("drew {} figure file{} in {} ({:.1f} s)\n", n, n == 1 ? "" : "s", message_line(dir.string()), secs);
  return 0;
}

}  // namespace tokdyn::plot_cli
