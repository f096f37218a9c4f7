// The presets on the decoder families, through the CLI: transformer-clustering (its closed-form
// layer-0 check), coupling-rank-collapse with model = a family (E2's ratio at layer 0 recomputed
// here from the checkpoint's embedding rows), depth-spectra, make-checkpoint, and the refusals
// (a prompt longer than the context, another family's checkpoint, a knob of another model).
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.hpp"
#include "tokdyn/models/decoder/checkpoint.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/models/decoder/decoder.hpp"

namespace tokdyn {
namespace {

using testing::TempDir;

TEST(DecoderPresets, TransformerClusteringOnARotaryFamilyPassesItsClosedFormCheck) {
  TempDir tmp;
  const testing::CliResult r = testing::run_cli(
      tmp.path(), {"run", "transformer-clustering", "--out", "tc", "--no-figures", "--set", "model=neox", "--set", "runs=3",
                   "--set", "tokens=8", "--set", "depth=6"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto checks = testing::read_csv_rows(tmp.path() / "tc" / "checks.csv");
  EXPECT_EQ(testing::check_row(checks, "layer0 positions").at("pass"), "true");
  const auto metrics = testing::read_csv_rows(tmp.path() / "tc" / "metrics.csv");
  EXPECT_EQ(metrics.size(), 2u * 7u);  // two variants, layers 0..6
}

TEST(DecoderPresets, RankCollapseOnAFamilyStartsFromItsNormalisedEmbeddings) {
  TempDir tmp;
  const testing::CliResult mk =
      testing::run_cli(tmp.path(), {"make-checkpoint", "--model", "gpt2", "--size", "tiny", "--seed", "4", "--out", "ck"});
  ASSERT_EQ(mk.code, 0) << mk.err;
  const testing::CliResult r = testing::run_cli(
      tmp.path(), {"run", "coupling-rank-collapse", "--out", "rc", "--no-figures", "--set", "model=gpt2", "--set",
                   "checkpoint=ck", "--set", "tokens=6", "--set", "depth=5", "--set", "runs=2"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = testing::read_csv_rows(tmp.path() / "rc" / "rank_collapse.csv");
  ASSERT_EQ(rows.size(), 12u);
  // Layer 0 recomputed here: x(0) = wte[id] + wpe[pos], standardised rows, |S - 1 mean^T| / |S|.
  const decoder::Model m = decoder::load(*decoder::find_family("gpt2"), tmp.path() / "ck");
  std::vector<std::size_t> shape;
  const std::vector<std::int64_t> ids = read_npy_int(tmp.path() / "rc" / "token_ids.npy", shape, 1000);
  ASSERT_EQ(shape, (std::vector<std::size_t>{2, 6}));
  for (int run = 0; run < 2; ++run) {
    Mat X(6, m.arch.d_model);
    for (int i = 0; i < 6; ++i) {
      X.row(i) = (m.wte.row(ids[static_cast<std::size_t>(run * 6 + i)]) + m.wpe.row(i)).cast<double>();
      X.row(i).array() -= X.row(i).mean();
      X.row(i) /= std::sqrt(X.row(i).squaredNorm() / static_cast<double>(X.cols()) + 1e-5);
    }
    Mat D = X;
    D.rowwise() -= X.colwise().mean();
    double got = -1;
    for (const auto& row : rows)
      if (row.at("layer") == "0" && row.at("run") == std::to_string(run)) got = std::stod(row.at("ratio"));
    EXPECT_NEAR(got, D.norm() / X.norm(), 1e-6) << "run " << run;
  }
  // The block's own knobs do not apply to a family; the family's do not apply to the block.
  const testing::CliResult bad =
      testing::run_cli(tmp.path(), {"run", "coupling-rank-collapse", "--out", "rc2", "--set", "model=gpt2", "--set", "d_ff=8"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("d_ff"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "rc2"));
}

TEST(DecoderPresets, DepthSpectraOfEachFamilyAndTheRefusals) {
  TempDir tmp;
  for (const char* fam : {"gpt2", "neox", "llama"}) {
    const testing::CliResult r = testing::run_cli(
        tmp.path(), {"run", "depth-spectra", "--out", std::string("ds-") + fam, "--no-figures", "--set", std::string("model=") + fam,
                     "--set", "tokens=5", "--set", "depth=8", "--set", "k=3", "--set", "burn_in=2", "--set", "H=3"});
    EXPECT_EQ(r.code, 0) << fam << ": " << r.err;
    EXPECT_TRUE(std::filesystem::exists(tmp.path() / (std::string("ds-") + fam) / "token_ids.npy")) << fam;
  }
  // A prompt longer than the model's context (tiny: 64 positions): one line, exit 2, nothing written.
  const testing::CliResult longer = testing::run_cli(
      tmp.path(), {"run", "depth-spectra", "--out", "long", "--set", "model=gpt2", "--set", "tokens=65", "--set", "k=2"});
  EXPECT_EQ(longer.code, 2);
  EXPECT_EQ(std::count(longer.err.begin(), longer.err.end(), '\n'), 1) << longer.err;
  EXPECT_NE(longer.err.find("tokens"), std::string::npos) << longer.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "long"));
  // A Llama checkpoint given to model=gpt2: refused naming config.json's model_type.
  ASSERT_EQ(testing::run_cli(tmp.path(), {"make-checkpoint", "--model", "llama", "--size", "tiny", "--out", "ll"}).code, 0);
  const testing::CliResult other = testing::run_cli(
      tmp.path(), {"run", "depth-spectra", "--out", "other", "--set", "model=gpt2", "--set", "checkpoint=ll", "--set", "tokens=4"});
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("model_type"), std::string::npos) << other.err;
  // A size of another family: refused by the model's own choices.
  const testing::CliResult sz = testing::run_cli(
      tmp.path(), {"run", "depth-spectra", "--out", "sz", "--set", "model=gpt2", "--set", "size=pythia-70m"});
  EXPECT_EQ(sz.code, 2);
  EXPECT_NE(sz.err.find("model=gpt2"), std::string::npos) << sz.err;
  // make-checkpoint of an unknown size: exit 2.
  EXPECT_EQ(testing::run_cli(tmp.path(), {"make-checkpoint", "--model", "neox", "--size", "huge", "--out", "x"}).code, 2);
}

// E4 on the families (coupling-qk-specificity, model = a family): the layers before the perturbed
// ones see identical states (the state difference is exactly 0 there), and the effect of late W_Q,
// W_K changes is second order in the distance from H without positions inside the layers (GPT-2;
// Llama with use_positions=false) and first order with rotary positions (NeoX) (Prop 8).
TEST(DecoderPresets, QkSpecificityOnTheFamiliesSeparatesSecondFromFirstOrder) {
  TempDir tmp;
  auto order_of = [&](const std::filesystem::path& dir) {
    for (const auto& row : testing::read_csv_rows(dir / "summary.csv"))
      if (row.at("quantity") == "order_log10_ratio") return std::stod(row.at("value"));
    return std::nan("");
  };
  for (const char* fam : {"gpt2", "llama", "neox"}) {
    const std::string ck = std::string("ck-") + fam, out = std::string("e4-") + fam;
    ASSERT_EQ(testing::run_cli(tmp.path(), {"make-checkpoint", "--model", fam, "--size", "small", "--seed", "3", "--out", ck}).code, 0);
    std::vector<std::string> args{"run", "coupling-qk-specificity", "--out", out, "--no-figures", "--set", std::string("model=") + fam,
                                  "--set", "checkpoint=" + ck, "--set", "tokens=10", "--set", "runs=3"};
    if (std::string(fam) == "llama") args.insert(args.end(), {"--set", "use_positions=false"});
    const testing::CliResult r = testing::run_cli(tmp.path(), args);
    ASSERT_EQ(r.code, 0) << fam << ": " << r.err;
    const auto rows = testing::read_csv_rows(tmp.path() / out / "qk_specificity.csv");
    ASSERT_EQ(rows.size(), 2u * 2u * 4u) << fam;  // two amplitudes, two variants, the 4 layers of size small
    // perturb_from = 0: the later half, layers 3 and 4; the state entering layers 1..3 is the same in both models.
    for (const auto& row : rows) {
      const int l = std::stoi(row.at("layer"));
      if (row.at("variant") != "perturbed") continue;
      if (l <= 3) EXPECT_EQ(std::stod(row.at("state_diff")), 0.0) << fam << " layer " << l;
      else EXPECT_GT(std::stod(row.at("state_diff")), 0.0) << fam << " layer " << l;
    }
    const double order = order_of(tmp.path() / out);
    const auto checks = testing::read_csv_rows(tmp.path() / out / "checks.csv");
    if (std::string(fam) == "neox") {
      EXPECT_LT(order, 1.3) << "rotary positions inside the layers: first order";
      EXPECT_TRUE(checks.empty()) << "no criterion with positions inside the layers";
    } else {
      EXPECT_NEAR(order, 2.0, 0.2) << fam;
      EXPECT_EQ(testing::check_row(checks, "E4").at("pass"), "true") << fam;
    }
  }
  // Refusals: depth does not apply to a family (its own layers run once); a perturbed layer past the
  // model's; the Transformer's perturbed layers start at 1.
  const testing::CliResult depth = testing::run_cli(
      tmp.path(), {"run", "coupling-qk-specificity", "--out", "bad1", "--set", "model=gpt2", "--set", "depth=5"});
  EXPECT_EQ(depth.code, 2);
  EXPECT_NE(depth.err.find("depth"), std::string::npos) << depth.err;
  const testing::CliResult past = testing::run_cli(
      tmp.path(), {"run", "coupling-qk-specificity", "--out", "bad2", "--set", "model=gpt2", "--set", "checkpoint=ck-gpt2",
                   "--set", "perturb_from=5"});
  EXPECT_EQ(past.code, 2);
  EXPECT_NE(past.err.find("perturb_from"), std::string::npos) << past.err;
  const testing::CliResult zero = testing::run_cli(
      tmp.path(), {"run", "coupling-qk-specificity", "--out", "bad3", "--set", "perturb_from=0"});
  EXPECT_EQ(zero.code, 2);
  for (const char* d : {"bad1", "bad2", "bad3"}) EXPECT_FALSE(std::filesystem::exists(tmp.path() / d)) << d;
}

}  // namespace
}  // namespace tokdyn
