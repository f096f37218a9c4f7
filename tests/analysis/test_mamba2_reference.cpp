// The C++ Mamba-2 engine (fp32, SSD quadratic form) against python/ref_mamba2.py, an independent
// float64 NumPy implementation written separately from the equations (token-by-token recurrence),
// layer by layer, on small random checkpoints (ngroups 1 and 2), for the reference block and every
// ablation switch, in both update modes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "test_util.hpp"
#include "tokdyn/build_info.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/models/mamba2/checkpoint.hpp"

using namespace tokdyn;
using namespace tokdyn::mamba2;
using tokdyn::testing::TempDir;

namespace {

/// Reads a C-order little-endian float64 .npy (format 1.0) written by NumPy.
std::vector<double> read_f8(const std::filesystem::path& f, std::vector<std::size_t>& shape) {
  const std::string s = tokdyn::testing::slurp(f);
  if (s.size() < 10 || s.compare(1, 5, "NUMPY") != 0) throw std::runtime_error("not npy: " + f.string());
  const std::size_t hlen = static_cast<unsigned char>(s[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(s[9])) << 8);
  const std::string h = s.substr(10, hlen);
  if (h.find("'<f8'") == std::string::npos || h.find("False") == std::string::npos) throw std::runtime_error("not C-order <f8: " + h);
  std::smatch m;
  if (!std::regex_search(h, m, std::regex("\\(([0-9, ]*)\\)"))) throw std::runtime_error("no shape: " + h);
  shape.clear();
  std::size_t n = 1;
  const std::string dims = m[1];
  const std::regex num("[0-9]+");
  for (std::sregex_iterator it(dims.begin(), dims.end(), num), end; it != end; ++it) {
    shape.push_back(std::stoull(it->str()));
    n *= shape.back();
  }
  std::vector<double> v(n);
  std::memcpy(v.data(), s.data() + 10 + hlen, n * sizeof(double));
  return v;
}

struct Case {
  const char* name;
  Switches sw;
  Update update;
  float tau;
};

}  // namespace

TEST(Mamba2Reference, AgreesWithTheIndependentNumPyImplementationLayerByLayer) {
  const char* py = std::getenv("TOKDYN_PYTHON");
  const std::string python = py ? py : "/usr/bin/python3";
  TempDir tmp;
  for (int ngroups : {1, 2}) {
    Config c;
    c.d_model = 48, c.n_layer = 3, c.vocab_size = 200, c.d_state = 16, c.headdim = 12, c.ngroups = ngroups;
    // Non-trivial weights: the reference init, with the norm weights and D perturbed away from 1.
    Model m = init_model(c, 40 + static_cast<std::uint64_t>(ngroups));
    Rng rng(99);
    for (Layer& L : m.layers) {
      for (int j = 0; j < L.norm_w.size(); ++j) L.norm_w[j] = static_cast<float>(rng.uniform(0.5, 1.5));
      for (int j = 0; j < L.mix_norm_w.size(); ++j) L.mix_norm_w[j] = static_cast<float>(rng.uniform(0.5, 1.5));
      for (int j = 0; j < L.D.size(); ++j) L.D[j] = static_cast<float>(rng.uniform(-1.0, 2.0));
      L.dt_bias[0] = 21.0f;  // the softplus threshold branch
    }
    // Through the file, as a user's checkpoint would come (F16 rounding of the norms is applied there).
    const auto ck = tmp.path() / fmt::format("ck{}", ngroups);
    save(m, ck);
    m = load(ck);

    const int runs = 3, len = 11;
    const long depth = 2 * c.n_layer;  // cycled twice
    std::vector<std::int64_t> ids(static_cast<std::size_t>(runs * len));
    for (auto& id : ids) id = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(c.vocab_size)));
    write_npy(tmp.path() / "ids.npy", ids.data(), {static_cast<std::size_t>(runs), static_cast<std::size_t>(len)});

    auto sw = [](bool gate, bool silu_bc, bool conv) {
      Switches s;
      s.gate = gate, s.silu_bc = silu_bc, s.conv = conv;
      return s;
    };
    const Case cases[] = {{"reference", sw(true, true, true), Update::Residual, 1.0f},
                          {"gate_off", sw(false, true, true), Update::Residual, 1.0f},
                          {"silu_bc_off", sw(true, false, true), Update::Residual, 1.0f},
                          {"conv_off", sw(true, true, false), Update::Residual, 1.0f},
                          {"sphere", sw(false, true, true), Update::Sphere, 0.5f}};
    for (const Case& cs : cases) {
      const auto out = tmp.path() / fmt::format("ref_{}_{}", ngroups, cs.name);
      const std::string cmd = fmt::format(
          "{} {}/python/ref_mamba2.py --checkpoint {} --ids {} --out {} --depth {} --gate {} --silu-bc {} --conv {} "
          "--mode {} --tau {} > {}/log.txt 2>&1",
          python, TOKDYN_SOURCE_DIR, ck.string(), (tmp.path() / "ids.npy").string(), out.string(), depth, cs.sw.gate ? 1 : 0,
          cs.sw.silu_bc ? 1 : 0, cs.sw.conv ? 1 : 0, cs.update == Update::Sphere ? "sphere" : "residual", cs.tau,
          tmp.path().string());
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << tokdyn::testing::slurp(tmp.path() / "log.txt");

      std::vector<MatF> states;
      std::vector<std::vector<float>> qs;
      BlockMap block(c, cs.sw, cycle_layers(m), cs.update, cs.tau);
      // The block's tap "q" [runs, tokens] (float, widened exactly to double by the observer).
      CallbackTapObserver qtap("q", [&](long, const double* q, const std::vector<std::size_t>&) { qs.emplace_back(q, q + runs * len); });
      block.watch(&qtap);
      CallbackObserver rec([&](double, const Batch& X) { states.push_back(X.Z.cast<float>()); });
      BatchF S{embed(m, ids, cs.update), runs, len};
      iterate(block, S, depth, {&rec});
      ASSERT_EQ(states.size(), static_cast<std::size_t>(depth + 1));
      double worst_rel = 0.0;
      for (long k = 0; k <= depth; ++k) {
        std::vector<std::size_t> shape;
        const auto ref = read_f8(out / fmt::format("state_{}.npy", k), shape);
        ASSERT_EQ(shape, (std::vector<std::size_t>{static_cast<std::size_t>(runs), static_cast<std::size_t>(len),
                                                   static_cast<std::size_t>(c.d_model)}));
        double num = 0.0, den = 0.0, worst = 0.0;
        for (std::size_t i = 0; i < ref.size(); ++i) {
          const double e = states[static_cast<std::size_t>(k)].data()[i] - ref[i];
          num += e * e;
          den += ref[i] * ref[i];
          worst = std::max(worst, std::abs(e));
        }
        const double rel = std::sqrt(num / den);
        worst_rel = std::max(worst_rel, rel);
        EXPECT_LT(rel, 1e-5) << "ngroups " << ngroups << ", " << cs.name << ", layer " << k;
        // Every entry, relative to the state's scale (rms of the entries).
        EXPECT_LT(worst / std::sqrt(den / static_cast<double>(ref.size())), 1e-4) << cs.name << ", layer " << k;
        if (k >= 1) {
          const auto qref = read_f8(out / fmt::format("q_{}.npy", k), shape);
          double qn = 0.0, qd = 0.0;
          for (std::size_t i = 0; i < qref.size(); ++i) {
            qn += (qs[static_cast<std::size_t>(k - 1)][i] - qref[i]) * (qs[static_cast<std::size_t>(k - 1)][i] - qref[i]);
            qd += qref[i] * qref[i];
          }
          EXPECT_LT(std::sqrt(qn / qd), 1e-5) << cs.name << ", q at layer " << k;
        }
      }
      std::printf("ngroups %d, %-12s: largest relative error over %ld layers %.2e\n", ngroups, cs.name, depth, worst_rel);
    }
  }
}
