// The decoder families (GPT-2, GPT-NeoX, Llama): config readers, checkpoint round trips, the
// exact tangent against finite differences, fp32 against the double step, same bits on any
// thread count, and the registry's refusals. The layer-by-layer comparison with an independent
// float64 PyTorch implementation is tests/python/test_decoder_reference.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "test_util.hpp"
#include "thread_util.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/model_registry.hpp"
#include "tokdyn/models/decoder/checkpoint.hpp"
#include "tokdyn/models/decoder/decoder.hpp"
#include "tokdyn/core/rng.hpp"

namespace tokdyn {
namespace {

using namespace decoder;
namespace fs = std::filesystem;

struct Case {
  std::string family, size;
};
const std::vector<Case> kCases = {{"gpt2", "tiny"}, {"neox", "tiny"}, {"neox", "tiny-sequential"}, {"llama", "tiny"},
                                  {"llama", "tiny-llama3"}};

Arch arch_of(const Case& c) {
  const Family* f = find_family(c.family);
  return f->parse_config(f->named_config(c.size), c.family);
}

/// A tiny model with every weight random (biases and norm weights too), so that each slot matters.
Model random_model(const Case& c, std::uint64_t seed) {
  const Family* f = find_family(c.family);
  Model m = init_model(*f, arch_of(c), seed);
  Rng rng(seed, {77});
  auto jiggle = [&](auto& v, double s) {
    for (Eigen::Index i = 0; i < v.size(); ++i) v.data()[i] += static_cast<float>(s * rng.normal());
  };
  for (Layer& L : m.layers) {
    jiggle(L.ln1_w, 0.2);
    jiggle(L.ln2_w, 0.2);
    jiggle(L.ln1_b, 0.1);
    jiggle(L.ln2_b, 0.1);
    jiggle(L.qkv_b, 0.1);
    jiggle(L.o_b, 0.1);
    jiggle(L.up_b, 0.1);
    jiggle(L.down_b, 0.1);
    jiggle(L.qkv_w, 0.1);  // larger logits: attention far from uniform
  }
  return m;
}

struct Built {
  Model model;
  std::unique_ptr<DecoderMap> map;
  Batch Z;
};

Built build(const Case& c, Update u, int runs, int T, Switches sw = {}) {
  Built b;
  b.model = random_model(c, 3);
  std::vector<std::shared_ptr<const Layer>> shared;
  for (const Layer& L : b.model.layers) shared.push_back(std::make_shared<const Layer>(L));
  b.map = std::make_unique<DecoderMap>(b.model.arch, sw, std::make_shared<const ListSchedule<Layer>>(shared), u, 0.5, T);
  const auto ids = draw_token_ids(static_cast<std::uint64_t>(b.model.arch.vocab_size), runs, T, 11);
  b.Z = Batch{embed(b.model, ids, T, sw, u).cast<double>(), runs, T};
  return b;
}

TEST(DecoderConfig, NamedSizesParseAndValidate) {
  for (const Family* f : families())
    for (const std::string& s : f->sizes) {
      const Arch a = f->parse_config(f->named_config(s), s);
      EXPECT_EQ(a.family, f->name);
      EXPECT_GT(a.parameters(), 0);
    }
  // Published sizes: GPT-2 small has 124,439,808 parameters (tied), Pythia-70m 70,426,624.
  EXPECT_EQ(arch_of({"gpt2", "124m"}).parameters(), 124439808.0);
  EXPECT_EQ(arch_of({"neox", "pythia-70m"}).parameters(), 70426624.0);
}

TEST(DecoderConfig, RefusesUnknownAndUnimplementedFieldsByName) {
  const Family* g = find_family("gpt2");
  const Family* l = find_family("llama");
  const Family* n = find_family("neox");
  auto refused = [](const Family* f, nlohmann::json j, const std::string& field) {
    try {
      f->parse_config(j, "config.json");
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  };
  auto j = g->named_config("tiny");
  j["scale_attn_by_inverse_layer_idx"] = true;
  refused(g, j, "scale_attn_by_inverse_layer_idx");
  j = g->named_config("tiny");
  j["some_new_switch"] = 1;
  refused(g, j, "some_new_switch");
  j = g->named_config("tiny");
  j["n_head"] = 5;
  refused(g, j, "n_head");
  j = l->named_config("tiny");
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  refused(l, j, "dynamic");
  j = l->named_config("tiny");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  refused(l, j, "yarn");
  j = l->named_config("tiny");
  j["num_key_value_heads"] = 3;
  refused(l, j, "num_key_value_heads");
  j = l->named_config("tiny");
  j["hidden_act"] = "quick_gelu";
  refused(l, j, "hidden_act");
  j = n->named_config("tiny");
  j["rotary_pct"] = 0.01;
  refused(n, j, "rotary_pct");
  j = n->named_config("tiny");
  j["model_type"] = "llama";
  refused(n, j, "model_type");
  // Harmless fields are accepted: dropout, token ids, metadata.
  j = n->named_config("tiny");
  j["hidden_dropout"] = 0.1;
  j["transformers_version"] = "4.40.0";
  EXPECT_NO_THROW(n->parse_config(j, "config.json"));
}

TEST(DecoderConfig, Llama3ScalingMatchesItsDefinition) {
  // Llama 3.1's rule at factor 8, low 1, high 4, original 16: wavelengths < 4 kept, > 16 divided
  // by 8, the band between interpolated.
  const Arch a = arch_of({"llama", "tiny-llama3"});
  const std::vector<double> f0 = rotary_frequencies(a.rotary_dims, a.rope_theta), f = a.frequencies();
  ASSERT_EQ(f.size(), f0.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double wl = 2 * M_PI / f0[i];
    if (wl < 4) EXPECT_EQ(f[i], f0[i]);
    else if (wl > 16) EXPECT_DOUBLE_EQ(f[i], f0[i] / 8);
    else {
      const double s = (16 / wl - 1) / 3;
      EXPECT_DOUBLE_EQ(f[i], (1 - s) * f0[i] / 8 + s * f0[i]);
    }
  }
}

TEST(DecoderCheckpoint, SaveThenLoadGivesTheSameWeightsInEveryLayout) {
  for (const Case& c : kCases) {
    const Family* f = find_family(c.family);
    const Model m = random_model(c, 5);
    testing::TempDir tmp;
    const fs::path dir = tmp.path() / c.size;
    save(*f, m, dir);
    const Model r = load(*f, dir);
    ASSERT_EQ(r.layers.size(), m.layers.size());
    EXPECT_EQ(r.wte, m.wte) << c.family;
    EXPECT_EQ(r.wpe, m.wpe) << c.family;
    for (std::size_t l = 0; l < m.layers.size(); ++l) {
      EXPECT_EQ(r.layers[l].qkv_w, m.layers[l].qkv_w) << c.family;
      EXPECT_EQ(r.layers[l].qkv_b, m.layers[l].qkv_b) << c.family;
      EXPECT_EQ(r.layers[l].o_w, m.layers[l].o_w) << c.family;
      EXPECT_EQ(r.layers[l].up_w, m.layers[l].up_w) << c.family;
      EXPECT_EQ(r.layers[l].down_w, m.layers[l].down_w) << c.family;
      EXPECT_EQ(r.layers[l].ln1_w, m.layers[l].ln1_w) << c.family;
      EXPECT_EQ(r.layers[l].ln2_b, m.layers[l].ln2_b) << c.family;
    }
    EXPECT_EQ(r.lm_head, m.lm_head) << c.family;
  }
}

TEST(DecoderCheckpoint, WritingNeverDeletesAPathItDidNotCreate) {
  testing::TempDir tmp;
  const Family* f = find_family("gpt2");
  const Model m = random_model({"gpt2", "tiny"}, 2);
  // A non-empty target is refused and left as it was.
  fs::create_directories(tmp.path() / "taken");
  std::ofstream(tmp.path() / "taken" / "mine.txt") << "user data";
  EXPECT_THROW(save(*f, m, tmp.path() / "taken"), InputError);
  EXPECT_EQ(testing::slurp(tmp.path() / "taken" / "mine.txt"), "user data");
  // A folder named like the writer's temporary is someone else's: refused, not removed.
  const fs::path clash = tmp.path().string() + "/ck.tmp-" + std::to_string(static_cast<long>(::getpid()));
  fs::create_directories(clash);
  std::ofstream(fs::path(clash) / "keep.txt") << "keep";
  EXPECT_THROW(save(*f, m, tmp.path() / "ck"), InputError);
  EXPECT_EQ(testing::slurp(fs::path(clash) / "keep.txt"), "keep");
  EXPECT_FALSE(fs::exists(tmp.path() / "ck"));
  fs::remove_all(clash);
  // Otherwise it writes, and leaves no temporary behind.
  save(*f, m, tmp.path() / "ck");
  EXPECT_TRUE(fs::exists(tmp.path() / "ck" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(clash));
}

TEST(DecoderCheckpoint, RefusesMissingUnexpectedAndMisshapenTensorsNamingThem) {
  const Case c{"llama", "tiny"};
  const Family* f = find_family(c.family);
  testing::TempDir tmp;
  const fs::path root = tmp.path();
  save(*f, random_model(c, 1), root / "ok");
  // Another family's reader on this checkpoint: refused by model_type.
  try {
    load(*find_family("gpt2"), root / "ok");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model_type"), std::string::npos) << e.what();
  }
  // A config whose shapes disagree with the tensors.
  fs::create_directories(root / "shape");
  fs::copy_file(root / "ok" / "model.safetensors", root / "shape" / "model.safetensors");
  auto j = f->named_config("tiny");
  j["intermediate_size"] = 200;
  std::ofstream(root / "shape" / "config.json") << j.dump();
  try {
    load(*f, root / "shape");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mlp.gate_proj.weight"), std::string::npos) << e.what();
  }
  // A model too large for this machine is refused from config.json, before any weight is read.
  fs::create_directories(root / "huge");
  j = f->named_config("tiny");
  j["hidden_size"] = 65536;
  j["intermediate_size"] = 1 << 20;
  j["num_attention_heads"] = 64;
  j["num_key_value_heads"] = 64;
  j["num_hidden_layers"] = 512;
  std::ofstream(root / "huge" / "config.json") << j.dump();
  std::ofstream(root / "huge" / "model.safetensors") << "x";
  EXPECT_THROW(load(*f, root / "huge"), ResourceError);
}

TEST(DecoderMap, TangentMatchesCentralDifferencesOfTheDoubleStep) {
  for (const Case& c : kCases)
    for (Update u : {Update::Residual, Update::Sphere}) {
      Built b = build(c, u, 2, 7);
      const Batch& Z = b.Z;
      Rng rng(9, {1});
      Tokens V(2 * Z.Z.rows(), Z.Z.cols());
      rng.fill_normal(V, 1.0);
      Tokens Y, dY;
      b.map->step_double_tangents(2, Z, V, Y, dY);
      for (int j = 0; j < 2; ++j) {
        const Tokens Vj = V.middleRows(j * Z.Z.rows(), Z.Z.rows());
        const double h = 1e-5 * Z.Z.norm() / Vj.norm();
        Tokens Yp, Ym, dummy;
        b.map->step_double_tangents(2, Batch{Z.Z + h * Vj, Z.runs, Z.len}, Vj, Yp, dummy);
        b.map->step_double_tangents(2, Batch{Z.Z - h * Vj, Z.runs, Z.len}, Vj, Ym, dummy);
        const Tokens fd = (Yp - Ym) / (2 * h);
        const Tokens ex = dY.middleRows(j * Z.Z.rows(), Z.Z.rows());
        EXPECT_LT((fd - ex).norm() / ex.norm(), 1e-6) << c.family << " " << c.size << " update " << static_cast<int>(u);
      }
    }
}

TEST(DecoderMap, Fp32StepAgreesWithTheDoubleStep) {
  for (const Case& c : kCases) {
    Built b = build(c, Update::Residual, 3, 9);
    Tokens Y, dY;
    b.map->step_double_tangents(1, b.Z, Tokens::Zero(b.Z.Z.rows(), b.Z.Z.cols()), Y, dY);
    BatchF F{b.Z.Z.cast<float>(), b.Z.runs, b.Z.len};
    b.map->apply_float(1, F);
    EXPECT_LT((F.Z.cast<double>() - Y).norm() / Y.norm(), 2e-6) << c.family << " " << c.size;
  }
}

TEST(DecoderMap, SameBitsOnAnyThreadCount) {
  testing::ThreadCountGuard guard;
  for (const Case& c : {Case{"gpt2", "small"}, Case{"llama", "small"}}) {
    Built b = build(c, Update::Residual, 3, 40);
    std::vector<MatF> outs;
    std::vector<Tokens> tans;
    Rng rng(4, {2});
    Tokens V(2 * b.Z.Z.rows(), b.Z.Z.cols());
    rng.fill_normal(V, 1.0);
    for (int t : testing::kThreadCounts) {
      testing::set_threads(t);
      BatchF F{b.Z.Z.cast<float>(), b.Z.runs, b.Z.len};
      b.map->apply_float(1, F);
      b.map->apply_float(2, F);
      outs.push_back(F.Z);
      Tokens Y, dY;
      b.map->step_double_tangents(1, b.Z, V, Y, dY);
      tans.push_back(dY);
    }
    for (std::size_t i = 1; i < outs.size(); ++i) {
      EXPECT_TRUE(outs[i] == outs[0]) << c.family << " threads " << testing::kThreadCounts[i];
      EXPECT_TRUE(tans[i] == tans[0]) << c.family << " threads " << testing::kThreadCounts[i];
    }
  }
}

TEST(DecoderMap, AblationsActWhereTheySay) {
  const Case c{"neox", "tiny"};
  // MLP only: no token mixing, so each token's update depends on that token alone (a closed
  // property: permuting the tokens of a run permutes the outputs).
  Switches sw;
  sw.attention = false;
  Built b = build(c, Update::Residual, 1, 6, sw);
  BatchF F{b.Z.Z.cast<float>(), 1, 6};
  b.map->apply_float(1, F);
  BatchF G{b.Z.Z.cast<float>(), 1, 6};
  G.Z.row(0).swap(G.Z.row(5));
  b.map->apply_float(1, G);
  // (to round-off: a BLAS kernel may round a row differently at another position of its tile)
  EXPECT_LT((G.Z.row(0) - F.Z.row(5)).norm(), 1e-6 * F.Z.row(5).norm());
  EXPECT_LT((G.Z.row(5) - F.Z.row(0)).norm(), 1e-6 * F.Z.row(0).norm());
  EXPECT_LT((G.Z.row(2) - F.Z.row(2)).norm(), 1e-6 * F.Z.row(2).norm());
  // Causal attention: the first token attends to itself alone, so its attention output is
  // W_o v_0 + b_o whatever the logits (a closed form of the layer; MLP off).
  Switches s0;
  s0.beta = 0;
  s0.mlp = false;
  Built z = build(c, Update::Residual, 1, 5, s0);
  Tokens Y, dY;
  z.map->step_double_tangents(1, z.Z, Tokens::Zero(5, z.Z.Z.cols()), Y, dY);
  const LayerT<double> L = widen(z.model.layers[0]);
  const Arch& a = z.model.arch;
  Mat H(1, a.d_model);
  norm_rows<double>(a.norm, Mat(z.Z.Z.topRows(1)), L.ln1_w, L.ln1_b, a.norm_eps, H, 0, 1);
  const Mat v = H * L.qkv_w.middleRows(a.q_rows() + a.kv_rows(), a.kv_rows()).transpose() +
                Mat(L.qkv_b.segment(a.q_rows() + a.kv_rows(), a.kv_rows()).transpose());
  const Mat out = z.Z.Z.topRows(1) + v * L.o_w.transpose() + Mat(L.o_b.transpose());
  EXPECT_LT((Y.topRows(1) - out).norm(), 1e-12);
}

TEST(DecoderRegistry, FamiliesAreRegistryModelsWithoutKnobConflicts) {
  EXPECT_TRUE(model_knob_conflicts().empty());
  for (const char* n : {"gpt2", "neox", "llama"}) {
    const ModelDescriptor& d = model_descriptor(n);
    EXPECT_TRUE(d.has_tap("attention"));
    EXPECT_FALSE(d.checkpoint_sizes.empty());
    EXPECT_EQ(d.schedule_knobs, (std::vector<std::string>{"layers", "layer"}));
  }
  // The shared knob 'size' keeps each model's own default through def_when.
  const std::vector<ParamSpec> u = model_knobs();
  const auto it = std::find_if(u.begin(), u.end(), [](const ParamSpec& q) { return q.key == "size"; });
  ASSERT_NE(it, u.end());
  bool gpt2_tiny = false;
  for (const auto& [c, v] : it->def_when)
    if (c.values == std::vector<std::string>{"gpt2"}) gpt2_tiny = std::get<std::string>(v) == "tiny";
  EXPECT_TRUE(gpt2_tiny);
}

}  // namespace
}  // namespace tokdyn
