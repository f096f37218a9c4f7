// The real Mamba-2 model on disk: configs (released sizes, both JSON formats, refusals) and the
// checkpoint layout, load/save, sharded and Hugging Face checkpoints, and bad tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mamba2_config_fixtures.hpp"
#include "test_util.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/models/mamba2/checkpoint.hpp"
#include "tokdyn/io/safetensors.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"

using namespace tokdyn;
using namespace tokdyn::mamba2;
using tokdyn::testing::TempDir;
using tokdyn::testing::small_config;

TEST(Mamba2Config, ReleasedSizesMatchTheReferenceTable) {
  struct Row {
    const char* size;
    int d, L, di, H, dip, cd;
    long params;
  };
  // mamba2.md §2: d_model, n_layer, d_inner, nheads, d_in_proj, conv_dim, parameter count.
  const Row rows[] = {{"130m", 768, 24, 1536, 24, 3352, 1792, 128989632L},
                      {"370m", 1024, 48, 2048, 32, 4384, 2304, 368346624L},
                      {"780m", 1536, 48, 3072, 48, 6448, 3328, 780161280L},
                      {"1.3b", 2048, 48, 4096, 64, 8512, 4352, 1343757312L},
                      {"2.7b", 2560, 64, 5120, 80, 10576, 5376, 2702599680L}};
  for (const Row& r : rows) {
    const Config c = Config::named(r.size);
    EXPECT_EQ(c.d_model, r.d);
    EXPECT_EQ(c.n_layer, r.L);
    EXPECT_EQ(c.d_inner(), r.di);
    EXPECT_EQ(c.nheads(), r.H);
    EXPECT_EQ(c.d_in_proj(), r.dip);
    EXPECT_EQ(c.conv_dim(), r.cd);
    EXPECT_EQ(c.vocab_padded(), 50288);
    const long per_layer = static_cast<long>(c.d_model) + static_cast<long>(c.d_in_proj()) * c.d_model +
                           static_cast<long>(c.conv_dim()) * (c.d_conv + 1) + 3L * c.nheads() + c.d_inner() +
                           static_cast<long>(c.d_model) * c.d_inner();
    EXPECT_EQ(static_cast<long>(c.vocab_padded()) * c.d_model + c.d_model + c.n_layer * per_layer, r.params) << r.size;
  }
}

TEST(Mamba2Config, ParsesStateSpacesAndHuggingFaceFormats) {
  const Config a = parse_config_text(
      R"({"d_model": 768, "d_intermediate": 0, "n_layer": 24, "vocab_size": 50277, "ssm_cfg": {"layer": "Mamba2"},
          "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": true, "residual_in_fp32": true, "fused_add_norm": true,
          "pad_vocab_size_multiple": 16, "tie_embeddings": true})",
      "ss");
  EXPECT_EQ(a.format, "state-spaces");
  EXPECT_EQ(a.d_in_proj(), 3352);
  EXPECT_EQ(a.vocab_padded(), 50288);
  const Config b = parse_config_text(
      R"({"hidden_size": 768, "num_heads": 24, "head_dim": 64, "n_groups": 1, "state_size": 128, "conv_kernel": 4,
          "expand": 2, "chunk_size": 256, "layer_norm_epsilon": 1e-05, "num_hidden_layers": 24, "residual_in_fp32": true,
          "rms_norm": true, "tie_word_embeddings": true, "use_bias": false, "use_conv_bias": true,
          "time_step_limit": [0.0, Infinity], "vocab_size": 50288, "model_type": "mamba2", "note": "Infinity in a string"})",
      "hf");
  EXPECT_EQ(b.format, "hf");
  EXPECT_EQ(b.d_in_proj(), 3352);
  EXPECT_EQ(b.vocab_padded(), 50288);
  const Config c = parse_config_text(small_config(2).to_json().dump(), "rt");
  EXPECT_EQ(c.ngroups, 2);
  EXPECT_EQ(c.d_state, 8);
  EXPECT_EQ(c.headdim, 8);
}

TEST(Mamba2Config, RejectsInconsistentConfigsOnOneLine) {
  const char* bad[] = {
      "not json",
      "[1, 2]",
      R"({"n_layer": 2})",
      R"({"d_model": 64, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba1"}})",
      R"({"d_model": 64, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba2", "headdim": 48}})",
      R"({"d_model": 64, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "ngroups": 3}})",
      R"({"d_model": -4, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba2"}})",
      R"({"d_model": 64, "n_layer": "two", "vocab_size": 10, "ssm_cfg": {"layer": "Mamba2"}})",
      R"({"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10, "n_groups": 1, "head_dim": 16, "num_heads": 5})",
  };
  for (const char* t : bad) {
    try {
      parse_config_text(t, "cfg.json");
      ADD_FAILURE() << "accepted: " << t;
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("cfg.json"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

TEST(Mamba2Checkpoint, MakeCheckpointWritesTheReferenceLayoutAndLoadsBackExactly) {
  TempDir tmp;
  const Config c = small_config(2);
  const Model m = init_model(c, 7);
  save(m, tmp.path() / "ck");
  const st::File f(tmp.path() / "ck" / "model.safetensors");
  EXPECT_EQ(f.header().tensors.size(), static_cast<std::size_t>(2 + 9 * c.n_layer));  // 218 for 130m
  EXPECT_EQ(f.header().find("lm_head.weight"), nullptr);  // tied
  EXPECT_EQ(f.header().metadata.at("format"), "pt");
  EXPECT_EQ(f.header().find("backbone.layers.0.mixer.in_proj.weight")->dtype, st::DType::F16);
  EXPECT_EQ(f.header().find("backbone.layers.0.mixer.A_log")->dtype, st::DType::F32);
  EXPECT_EQ(f.header().find("backbone.layers.2.mixer.conv1d.weight")->shape,
            (std::vector<std::uint64_t>{static_cast<std::uint64_t>(c.conv_dim()), 1, 4}));
  const Model r = load(tmp.path() / "ck");
  EXPECT_EQ(r.generated_by, m.generated_by);
  ASSERT_EQ(r.layers.size(), m.layers.size());
  EXPECT_EQ(r.embedding, m.embedding);
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    EXPECT_EQ(r.layers[l].in_proj, m.layers[l].in_proj);
    EXPECT_EQ(r.layers[l].out_proj, m.layers[l].out_proj);
    EXPECT_EQ(r.layers[l].conv_w, m.layers[l].conv_w);
    EXPECT_EQ(r.layers[l].conv_b, m.layers[l].conv_b);
    EXPECT_EQ(r.layers[l].A_log, m.layers[l].A_log);
    EXPECT_EQ(r.layers[l].dt_bias, m.layers[l].dt_bias);
  }
  // The reference initialisation's ranges.
  const Layer& L = m.layers[0];
  EXPECT_LE(L.in_proj.cwiseAbs().maxCoeff(), 1.0f / std::sqrt(24.0f) * 1.001f);
  EXPECT_LE(L.out_proj.cwiseAbs().maxCoeff(), 1.0f / std::sqrt(48.0f) / std::sqrt(3.0f) * 1.001f);
  EXPECT_LE(L.conv_w.cwiseAbs().maxCoeff(), 0.5f * 1.001f);
  for (int h = 0; h < c.nheads(); ++h) {
    EXPECT_GE(std::exp(L.A_log[h]), 1.0f - 1e-5f);
    EXPECT_LE(std::exp(L.A_log[h]), 16.0f + 1e-4f);
    const double dt = std::log1p(std::exp(static_cast<double>(L.dt_bias[h])));  // softplus(dt_bias) = the drawn dt
    EXPECT_GE(dt, 1e-3 * 0.999);
    EXPECT_LE(dt, 1e-1 * 1.001);
  }
  EXPECT_NEAR(std::sqrt(m.embedding.cast<double>().squaredNorm() / static_cast<double>(m.embedding.size())), 0.02, 0.002);
  // Writing over a non-empty directory is refused, and leaves nothing behind.
  EXPECT_THROW(save(m, tmp.path() / "ck"), InputError);
}

TEST(Mamba2Checkpoint, HuggingFaceNamesAndExtraLmHeadLoad) {
  TempDir tmp;
  const Config c = small_config();
  const Model m = init_model(c, 1);
  const auto d = static_cast<std::uint64_t>(c.d_model), V = static_cast<std::uint64_t>(c.vocab_padded());
  std::vector<st::TensorToWrite> w{{"backbone.embeddings.weight", st::DType::F32, {V, d}, m.embedding.data()},
                                   {"lm_head.weight", st::DType::BF16, {V, d}, m.embedding.data()},
                                   {"backbone.norm_f.weight", st::DType::F32, {d}, m.norm_f.data()}};
  const auto di = static_cast<std::uint64_t>(c.d_inner()), H = static_cast<std::uint64_t>(c.nheads()),
             cd = static_cast<std::uint64_t>(c.conv_dim()), dip = static_cast<std::uint64_t>(c.d_in_proj());
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const Layer& L = m.layers[static_cast<std::size_t>(l)];
    w.push_back({p + "norm.weight", st::DType::F32, {d}, L.norm_w.data()});
    w.push_back({p + "mixer.in_proj.weight", st::DType::F32, {dip, d}, L.in_proj.data()});
    w.push_back({p + "mixer.conv1d.weight", st::DType::F32, {cd, 1, 4}, L.conv_w.data()});
    w.push_back({p + "mixer.conv1d.bias", st::DType::F32, {cd}, L.conv_b.data()});
    w.push_back({p + "mixer.dt_bias", st::DType::F32, {H}, L.dt_bias.data()});
    w.push_back({p + "mixer.A_log", st::DType::F32, {H}, L.A_log.data()});
    w.push_back({p + "mixer.D", st::DType::F32, {H}, L.D.data()});
    w.push_back({p + "mixer.norm.weight", st::DType::F32, {di}, L.mix_norm_w.data()});
    w.push_back({p + "mixer.out_proj.weight", st::DType::F32, {d, di}, L.out_proj.data()});
  }
  std::filesystem::create_directories(tmp.path() / "hf");
  st::write_file(tmp.path() / "hf" / "model.safetensors", w);
  std::ofstream(tmp.path() / "hf" / "config.json")
      << R"({"hidden_size": 24, "num_heads": 6, "head_dim": 8, "n_groups": 1, "state_size": 8, "conv_kernel": 4, "expand": 2,
            "layer_norm_epsilon": 1e-05, "num_hidden_layers": 3, "tie_word_embeddings": true, "use_bias": false,
            "use_conv_bias": true, "time_step_limit": [0.0, Infinity], "vocab_size": 112, "model_type": "mamba2"})";
  const Model r = load(tmp.path() / "hf");
  EXPECT_EQ(r.cfg.format, "hf");
  EXPECT_TRUE(r.generated_by.empty());  // not written by make-checkpoint
  EXPECT_EQ(r.embedding, m.embedding);
  EXPECT_EQ(r.layers[2].in_proj, m.layers[2].in_proj);
}

TEST(Mamba2Checkpoint, ShardedCheckpointLoadsLikeTheSingleFile) {
  TempDir tmp;
  const Config c = small_config(2);
  const Model m = init_model(c, 12);
  save(m, tmp.path() / "one");
  const st::File f(tmp.path() / "one" / "model.safetensors");
  std::vector<std::vector<float>> data;
  for (const auto& t : f.header().tensors) data.push_back(f.read_float(t.name));
  // Two shards: the embedding and layer 0 in the first, the rest in the second.
  std::vector<st::TensorToWrite> a, b;
  nlohmann::json map = nlohmann::json::object();
  std::size_t i = 0;
  for (const auto& t : f.header().tensors) {
    const bool first = t.name.rfind("backbone.embedding", 0) == 0 || t.name.rfind("backbone.layers.0.", 0) == 0;
    (first ? a : b).push_back({t.name, t.dtype, t.shape, data[i++].data()});
    map[t.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  const auto dir = tmp.path() / "sharded";
  std::filesystem::create_directories(dir);
  st::write_file(dir / "model-00001-of-00002.safetensors", a);
  st::write_file(dir / "model-00002-of-00002.safetensors", b);
  std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
  std::filesystem::copy_file(tmp.path() / "one" / "config.json", dir / "config.json");
  const Model r = load(dir);
  EXPECT_EQ(r.embedding, m.embedding);
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    EXPECT_EQ(r.layers[l].in_proj, m.layers[l].in_proj);
    EXPECT_EQ(r.layers[l].D, m.layers[l].D);
  }
}

namespace {

/// Writes a checkpoint, lets `edit` change one tensor list entry, and expects load() to fail
/// with a one-line message containing `needle`.
void expect_load_error(const std::function<void(std::vector<st::TensorToWrite>&, std::vector<float>&)>& edit,
                       const std::string& needle) {
  TempDir tmp;
  const Config c = small_config();
  const Model m = init_model(c, 2);
  save(m, tmp.path() / "ck");
  const st::File f(tmp.path() / "ck" / "model.safetensors");
  std::vector<std::vector<float>> data;
  std::vector<st::TensorToWrite> w;
  for (const auto& t : f.header().tensors) data.push_back(f.read_float(t.name));
  std::size_t i = 0;
  for (const auto& t : f.header().tensors) w.push_back({t.name, t.dtype, t.shape, data[i++].data()});
  std::vector<float> extra(4096, 0.5f);
  edit(w, extra);
  std::filesystem::remove(tmp.path() / "ck" / "model.safetensors");
  st::write_file(tmp.path() / "ck" / "model.safetensors", w);
  try {
    load(tmp.path() / "ck");
    ADD_FAILURE() << "loaded a bad checkpoint (" << needle << ")";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Mamba2Checkpoint, RefusesMissingUnexpectedMisshapenAndNonFiniteTensors) {
  expect_load_error([](auto& w, auto&) { w.erase(w.begin() + 3); }, "missing tensor");
  expect_load_error([](auto& w, auto& x) { w.push_back({"backbone.layers.9.mixer.D", st::DType::F32, {4}, x.data()}); },
                    "unexpected tensor 'backbone.layers.9.mixer.D'");
  expect_load_error(
      [](auto& w, auto& x) {
        for (auto& t : w)
          if (t.name == "backbone.layers.1.mixer.dt_bias") t = {t.name, t.dtype, {5}, x.data()};
      },
      "implies");
  expect_load_error(
      [](auto& w, auto& x) {
        x[2] = std::numeric_limits<float>::quiet_NaN();
        for (auto& t : w)
          if (t.name == "backbone.layers.0.mixer.A_log") t.data = x.data();
      },
      "non-finite");
  expect_load_error(
      [](auto& w, auto& x) {
        x[0] = std::numeric_limits<float>::infinity();
        for (auto& t : w)
          if (t.name == "backbone.norm_f.weight") t.data = x.data();
      },
      "non-finite");
}

TEST(Mamba2Checkpoint, PyTorchBinIsRefusedWithTheConversionRecipe) {
  TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "ck");
  std::ofstream(tmp.path() / "ck" / "config.json") << small_config().to_json().dump();
  std::ofstream(tmp.path() / "ck" / "pytorch_model.bin", std::ios::binary) << std::string("PK\x03\x04\x14\x00\x00\x00rest", 12);
  try {
    load(tmp.path() / "ck");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("safetensors"), std::string::npos) << e.what();
  }
}
