#pragma once
// `tokdyn plot DIR [--figure-format png,svg,pdf] [--dpi N]`: a run's figures drawn again from its
// written results (the figure kind from the manifest's preset), in other formats or at another
// resolution. The results folder is replaced atomically by a copy (hard links) with the new figures
// and a manifest listing them ("figures_redrawn": formats, dpi, time); the data files are not
// touched. A failed drawing leaves the run as it was (exit 5). Sweeps are refused (their figures
// come from `tokdyn sweep --plot`).
#include <string>

namespace tokdyn::plot_cli {

int run(const std::string& dir);

}  // namespace tokdyn::plot_cli
