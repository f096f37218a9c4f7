// The presets ssm-theorem-pe and ssm-theorem-pd end to end at small sizes: schema validation,
// determinism across thread counts, and the key outputs (PE constants, fitted vs predicted rates,
// the isotropic domain of attraction and its shrinking with anisotropy).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tokdyn/error.hpp"
#include "tokdyn/experiment.hpp"

namespace fs = std::filesystem;
using namespace tokdyn;

namespace {

using Sets = std::vector<std::pair<std::string, std::string>>;
using Rows = std::vector<std::map<std::string, std::string>>;

fs::path run_preset(const std::string& name, const std::string& tag, int threads, const Sets& sets) {
  const Experiment* e = find_experiment(name);
  EXPECT_NE(e, nullptr) << name;
  const Params p = resolve_params(*e, sets);
  const fs::path out = fs::temp_directory_path() / ("tokdyn_test_thm_" + tag + "_" + std::to_string(::getpid()));
  run_experiment(*e, p, out, threads, /*figures=*/false, /*show_progress=*/false);
  return out;
}

Rows read_csv(const fs::path& f) {
  std::ifstream in(f);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head;
  {
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) head.push_back(c);
  }
  Rows rows;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::map<std::string, std::string> r;
    std::size_t k = 0;
    for (std::string c; std::getline(ss, c, ',') && k < head.size(); ++k) r[head[k]] = c;
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string slurp(const fs::path& f) {
  std::ifstream in(f);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double constant(const Rows& rows, const std::string& variant, const std::string& name) {
  for (const auto& r : rows)
    if (r.at("variant") == variant && r.at("constant") == name) return std::stod(r.at("value"));
  ADD_FAILURE() << "no constant " << variant << "/" << name;
  return NAN;
}

Sets pe_sets(int runs, int tokens, double t_end) {
  return {{"runs", std::to_string(runs)}, {"tokens", std::to_string(tokens)}, {"t_end", std::to_string(t_end)},
          {"h", "0.01"}, {"seed", "5"}};
}

}  // namespace

TEST(SsmTheoremPresets, SchemaRejectsOutOfRangeParameters) {
  const Experiment* pe = find_experiment("ssm-theorem-pe");
  const Experiment* pd = find_experiment("ssm-theorem-pd");
  ASSERT_NE(pe, nullptr);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(pe->figure_kind, "ssm-theorem-pe");
  EXPECT_EQ(pd->figure_kind, "ssm-theorem-pd");
  for (const auto& [k, v] : Sets{{"runs", "0"}, {"tokens", "0"}, {"t_end", "0"}, {"h", "-0.1"}, {"c", "0"}, {"c", "1.5"}}) {
    EXPECT_THROW(resolve_params(*pe, {{k, v}}), InputError) << k << "=" << v;
    EXPECT_THROW(resolve_params(*pd, {{k, v}}), InputError) << k << "=" << v;
  }
  // c = 1 passes the schema's inclusive bound but is refused before anything runs.
  const fs::path out = fs::temp_directory_path() / ("tokdyn_test_thm_c1_" + std::to_string(::getpid()));
  EXPECT_THROW(run_experiment(*pe, resolve_params(*pe, {{"c", "1"}}), out, 1, false, false), InputError);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_THROW(run_experiment(*pd, resolve_params(*pd, {{"ani2_d", "25,50"}, {"ani2_k", "11"}}), out, 1, false, false),
               InputError);
  EXPECT_FALSE(fs::exists(out));
}

// The same bytes on 1, 2, 3 and 4 threads: 20 runs are 3 chunks of the parallel chunk loop (run
// in any order by any thread), whose results are stitched together in chunk order.
TEST(SsmTheoremPresets, PeRunIsIdenticalOnOneToFourThreads) {
  const Sets s = pe_sets(20, 3, 4.0);  // three chunks of runs
  const fs::path a = run_preset("ssm-theorem-pe", "t1", 1, s);
  for (int th : {2, 3, 4}) {
    const fs::path b = run_preset("ssm-theorem-pe", "t" + std::to_string(th), th, s);
    for (const char* f : {"metrics.csv", "convergence.csv", "rates.csv", "constants.csv"})
      EXPECT_EQ(slurp(a / f), slurp(b / f)) << f << ", " << th << " threads";
    fs::remove_all(b);
  }
  fs::remove_all(a);
}

// S-PE constants of Lemma IV.2 (T12) and the decay rates: fitted ~ predicted (2, §2.6) >> certified.
TEST(SsmTheoremPresets, PeRatesMatchPredictionAndExceedCertificate) {
  const Sets s = pe_sets(4, 5, 16.0);
  const fs::path d = run_preset("ssm-theorem-pe", "rates", 2, s);
  const Rows c = read_csv(d / "constants.csv");
  EXPECT_NEAR(constant(c, "pe", "rho"), 0.448851, 1e-5);
  EXPECT_NEAR(constant(c, "pe", "eta0"), -2.587135, 1e-5);
  EXPECT_NEAR(constant(c, "pe", "c1"), 0.962382, 1e-5);
  EXPECT_NEAR(constant(c, "pe", "M1"), 20.8215, 1e-4);
  EXPECT_NEAR(constant(c, "pef", "rho"), -1.906423, 1e-5);
  EXPECT_NEAR(constant(c, "cap", "rho"), 0.7 * 1.7 * 0.235, 1e-9);  // a_c(0.235) = gamma c (1 + c) q at c = 0.7
  EXPECT_NEAR(constant(c, "pe", "rho_2"), constant(c, "pe", "rho") / 4, 1e-12);
  const Rows r = read_csv(d / "rates.csv");
  ASSERT_EQ(r.size(), 15u);
  for (const auto& row : r) {
    const double pred = std::stod(row.at("predicted_rate"));
    EXPECT_NEAR(pred, 2.0, 1e-9) << row.at("variant");
    EXPECT_NEAR(std::stod(row.at("fitted_rate_min")), pred, 0.03 * pred) << row.at("variant") << " token " << row.at("token");
    EXPECT_NEAR(std::stod(row.at("fitted_rate_mean")), pred, 0.08 * pred) << row.at("variant") << " token " << row.at("token");
    EXPECT_EQ(row.at("converged_runs"), row.at("runs"));
    if (!row.at("certified_rho").empty()) {
      EXPECT_LT(std::stod(row.at("certified_rho")), std::stod(row.at("fitted_rate_min")));
    }
  }
  const Rows m = read_csv(d / "metrics.csv");
  EXPECT_NEAR(std::stod(m.back().at("lambda1_mean")), 1.0, 1e-12);  // consensus: lambda_bar_1 = r = 1
  EXPECT_NEAR(std::stod(m.back().at("pr_mean")), 1.0, 1e-12);
  fs::remove_all(d);
}

// Theorem V.1: isotropic kernel converges from every random start; anisotropy traps a positive
// fraction that grows with c_star (S-ANI2 family); converged + trapped = runs.
TEST(SsmTheoremPresets, PdIsotropicConvergesAndAnisotropyShrinksDomain) {
  const fs::path d = run_preset("ssm-theorem-pd", "doa", 2,
                                {{"runs", "16"}, {"doa_runs", "120"}, {"h", "0.04"}, {"every", "1"},
                                 {"ani2_d", "25,400"}, {"ani2_k", "11,80"}, {"seed", "2"}});
  const Rows doa = read_csv(d / "doa.csv");
  ASSERT_EQ(doa.size(), 3u);
  EXPECT_EQ(doa[0].at("design"), "s-iso");
  EXPECT_EQ(std::stod(doa[0].at("fraction")), 1.0);
  EXPECT_LT(std::stod(doa[0].at("c_star")), 1e-12);
  EXPECT_NEAR(std::stod(doa[1].at("c_star")), 28.6006993, 1e-6);
  EXPECT_NEAR(std::stod(doa[1].at("c_eff")), 0.9981088, 1e-7);
  const double p = 1 - 0.1511369, se = std::sqrt(p * (1 - p) / 120);
  EXPECT_NEAR(std::stod(doa[1].at("fraction")), p, 4 * se);
  EXPECT_LT(std::stod(doa[2].at("fraction")), std::stod(doa[1].at("fraction")));
  EXPECT_GT(std::stod(doa[2].at("c_eff")), std::stod(doa[1].at("c_eff")));
  for (const auto& row : doa)
    EXPECT_EQ(std::stol(row.at("converged")) + std::stol(row.at("trapped")), std::stol(row.at("runs"))) << row.at("design");
  const Rows conv = read_csv(d / "convergence.csv");
  double worst = 0.0;
  for (const auto& row : conv)
    if (row.at("variant") == "s-iso" && std::stod(row.at("t")) == 40.0) worst = std::max(worst, std::stod(row.at("V")));
  EXPECT_LT(worst, 1e-10);
  fs::remove_all(d);
}
