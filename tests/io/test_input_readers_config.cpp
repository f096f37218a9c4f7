// The strict readers of a model's configuration never accept wrong numbers: strict JSON (duplicate
// keys, depth, Python's NaN/Infinity tokens), the strict config.json reader (duplicate keys,
// NaN/Infinity, dt clamps and fields tokdyn does not apply), and the real vocabulary in both
// config layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "input_readers_fixtures.hpp"
#include "tokdyn/io/json_strict.hpp"
#include "tokdyn/models/mamba2/config_json.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"

using namespace tokdyn;
using tokdyn::testing::input_readers::error_of;
using tokdyn::testing::input_readers::kSsSmall;

namespace {

void expect_config_refused(const std::string& text, const std::string& needle) {
  const std::string m = error_of([&] { mamba2::parse_config_text(text, "cfg.json"); });
  EXPECT_EQ(m.rfind("cfg.json: ", 0), 0u) << m;
  EXPECT_NE(m.find(needle), std::string::npos) << "config: " << text << "\nmessage: " << m;
  EXPECT_NE(m.find("expected"), std::string::npos) << m;
}

// The state-spaces config.json of mamba2-130m.
const char* const kSs130m =
    R"({"d_model": 768, "d_intermediate": 0, "n_layer": 24, "vocab_size": 50277, "ssm_cfg": {"layer": "Mamba2"},
        "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": true, "residual_in_fp32": true, "fused_add_norm": true,
        "pad_vocab_size_multiple": 16, "tie_embeddings": true})";
// The Hugging Face port's config of the same model (as the HF conversion script writes it).
const char* const kHf130m =
    R"({"architectures": ["Mamba2ForCausalLM"], "bos_token_id": 0, "chunk_size": 256, "conv_kernel": 4,
        "eos_token_id": 0, "expand": 2, "head_dim": 64, "hidden_act": "silu", "hidden_size": 768,
        "initializer_range": 0.1, "layer_norm_epsilon": 1e-05, "model_type": "mamba2", "n_groups": 1,
        "num_heads": 24, "num_hidden_layers": 24, "pad_token_id": 0, "rescale_prenorm_residual": false,
        "residual_in_fp32": true, "rms_norm": true, "state_size": 128, "tie_word_embeddings": true,
        "time_step_floor": 0.0001, "time_step_limit": [0.0, Infinity], "time_step_max": 0.1, "time_step_min": 0.001,
        "time_step_rank": 48, "torch_dtype": "float32", "transformers_version": "4.44.0", "use_bias": false,
        "use_cache": true, "use_conv_bias": true, "vocab_size": 50288})";
const std::string kHfSmall =
    R"("hidden_size": 64, "num_heads": 8, "head_dim": 16, "n_groups": 1, "state_size": 16, "num_hidden_layers": 2, "vocab_size": 1008)";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Strict JSON

TEST(JsonStrict, DuplicatesDepthAndPythonTokens) {
  using json_strict::Problem;
  json_strict::Options py;
  py.python_nonfinite = true;
  auto r = json_strict::parse(R"({"a": {"b": [1, {"c": 1, "c": 2}]}})");
  EXPECT_EQ(r.problem, Problem::Duplicate);
  EXPECT_EQ(r.key, "c");
  EXPECT_EQ(r.path, "a.b[1]");
  EXPECT_EQ(json_strict::parse(R"({"a": 1, "a": 1})").problem, Problem::Duplicate);
  EXPECT_EQ(json_strict::parse(std::string(65, '[') + std::string(65, ']')).problem, Problem::TooDeep);
  // Python's tokens only on request, and only as whole tokens.
  EXPECT_EQ(json_strict::parse("[Infinity]").problem, Problem::Syntax);
  r = json_strict::parse(R"([1, Infinity, -Infinity, NaN, "Infinity", 2.5e3, -0])", py);
  ASSERT_EQ(r.problem, Problem::None) << r.message;
  EXPECT_TRUE(std::isinf(r.value[1].get<double>()) && r.value[1].get<double>() > 0);
  EXPECT_TRUE(std::isinf(r.value[2].get<double>()) && r.value[2].get<double>() < 0);
  EXPECT_TRUE(std::isnan(r.value[3].get<double>()));
  EXPECT_EQ(r.value[4], "Infinity");
  EXPECT_EQ(r.value[5].get<double>(), 2500.0);
  for (const char* bad : {"[-NaN]", "[1NaN]", "[Infinity5]", "[NaNe5]", "[Infinityy]", "[--Infinity]", "[1e400]"})
    EXPECT_EQ(json_strict::parse(bad, py).problem, Problem::Syntax) << bad;
  // Messages keep the file's line and column although the tokens were replaced.
  r = json_strict::parse("{\"a\": [1],\n \"b\": [Infinity, NaN, x]}", py);
  EXPECT_EQ(r.message.rfind("parse error at line 2, column 23: syntax error while parsing value - invalid literal", 0), 0u)
      << r.message;
  EXPECT_EQ(r.message.find("last read"), std::string::npos) << r.message;  // it would show the replacement
  EXPECT_EQ(json_strict::brief(json_strict::parse("[Infinity, NaN]", py).value), "[Infinity, NaN]");
}

// ---------------------------------------------------------------------------------------------
// config.json

TEST(Mamba2ConfigStrict, DuplicateKeysAreRefusedAtAnyDepth) {
  expect_config_refused(std::string("{") + kSsSmall + R"(, "n_layer": 3, "ssm_cfg": {"layer": "Mamba2", "headdim": 16}})",
                        "duplicate key 'n_layer'; expected each key once");
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "headdim": 32}})",
                        "duplicate key 'headdim' in 'ssm_cfg'");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "vocab_size": 50288})", "duplicate key 'vocab_size'");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "extra": {"x": [{"k": 1, "k": 2}]}})",
                        "duplicate key 'k' in 'extra.x[0]'");
}

TEST(Mamba2ConfigStrict, NanAndInfinityAreRefusedInNumericFields) {
  expect_config_refused(std::string("{") + kHfSmall + R"(, "layer_norm_epsilon": NaN})",
                        "key 'layer_norm_epsilon' is NaN; expected a finite number");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "layer_norm_epsilon": Infinity})", "is Infinity");
  expect_config_refused(R"({"hidden_size": Infinity, "num_hidden_layers": 2, "vocab_size": 10, "n_groups": 1})",
                        "key 'hidden_size' is Infinity");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_min": -Infinity})", "key 'time_step_min' is -Infinity");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [NaN, Infinity]})",
                        "key 'time_step_limit[0]' is NaN");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.0, -Infinity]})", "is -Infinity");
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "d_state": NaN}})",
                        "key 'ssm_cfg.d_state' is NaN");
  // state-spaces: Infinity only as the upper end of ssm_cfg.dt_limit, not of a HF key.
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "dt_max": Infinity}})",
                        "key 'ssm_cfg.dt_max' is Infinity");
  // Numbers that overflow a double are not a way around it.
  expect_config_refused(std::string("{") + kHfSmall + R"(, "layer_norm_epsilon": 1e999})", "not valid JSON");
}

TEST(Mamba2ConfigStrict, InfinityInTimeStepLimitIsAccepted) {
  const mamba2::Config hf = mamba2::parse_config_text(kHf130m, "hf.json");
  EXPECT_EQ(hf.format, "hf");
  EXPECT_EQ(hf.d_in_proj(), 3352);
  const mamba2::Config ss = mamba2::parse_config_text(
      std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "dt_limit": [0.0, Infinity]}})", "ss.json");
  EXPECT_EQ(ss.headdim, 16);
  // Absent limits are the default (0, inf): no clamp either.
  EXPECT_EQ(mamba2::parse_config_text(std::string("{") + kHfSmall + "}", "x").d_model, 64);
}

TEST(Mamba2ConfigStrict, DtClampIsRefusedBecauseTokdynAppliesNone) {
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.001, 0.1]})",
                        "key 'time_step_limit': [0.001, 0.1] would clamp dt after the softplus, and tokdyn applies no dt clamp");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.0, 100.0]})", "applies no dt clamp");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.0])", "not valid JSON");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": [0.0]})", "expected two numbers [low, high]");
  expect_config_refused(std::string("{") + kHfSmall + R"(, "time_step_limit": "none"})", "expected two numbers");
  expect_config_refused(
      std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16, "dt_limit": [0.001, 0.1]}})",
      "key 'ssm_cfg.dt_limit': [0.001, 0.1] would clamp dt");
}

TEST(Mamba2ConfigStrict, FieldsTokdynDoesNotApplyAreRefused) {
  const std::string ss = std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16)";
  expect_config_refused(ss + R"(, "conv_bias": false}})", "key 'ssm_cfg.conv_bias': false is not supported");
  expect_config_refused(ss + R"(, "bias": true}})", "key 'ssm_cfg.bias': true is not supported");
  expect_config_refused(ss + R"(, "norm_before_gate": true}})", "norm_before_gate");
  expect_config_refused(ss + R"(, "D_has_hdim": true}})", "D_has_hdim");
  expect_config_refused(ss + R"(, "rmsnorm": false}})", "rmsnorm");
  expect_config_refused(ss + R"(, "d_ssm": 64}})", "would put only part of the channels through the SSM");
  expect_config_refused(ss + R"(, "activation": "relu"}})", "unknown key 'ssm_cfg.activation' (the reference Mamba2 module");
  expect_config_refused(ss + R"(}, "norm_epsilon": 1e-6})", "unknown key 'norm_epsilon' (the reference MambaConfig");
  expect_config_refused(ss + R"(}, "d_intermediate": 128})", "MLP blocks are not supported");
  expect_config_refused(ss + R"(}, "attn_layer_idx": [1]})", "attention layers are not supported");
  expect_config_refused(ss + R"(}, "rms_norm": false})", "key 'rms_norm': false is not supported");
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"headdim": 16}})", "an absent layer means Mamba1");
  // Accepted: d_ssm null or d_inner, init-only and kernel fields.
  EXPECT_EQ(mamba2::parse_config_text(ss + R"(, "d_ssm": 128, "dt_min": 0.01, "chunk_size": 64, "A_init_range": [1, 16]}})", "x")
                .d_inner(),
            128);
  const std::string hf = std::string("{") + kHfSmall;
  expect_config_refused(hf + R"(, "hidden_act": "gelu"})", "key 'hidden_act': \"gelu\" is not supported");
  expect_config_refused(hf + R"(, "use_conv_bias": false})", "key 'use_conv_bias': false is not supported");
  expect_config_refused(hf + R"(, "use_bias": true})", "use_bias");
  expect_config_refused(hf + R"(, "rms_norm": false})", "rms_norm");
  expect_config_refused(hf + R"(, "norm_before_gate": true})", "norm_before_gate");
  expect_config_refused(hf + R"(, "model_type": "mamba"})", "expected \"mamba2\"");
  expect_config_refused(hf + R"(, "layer_norm_epsilon": -1e-5})", "expected a number > 0");
  expect_config_refused(hf + R"(, "layer_norm_epsilon": "1e-5"})", "expected a number");
  expect_config_refused(R"({"hidden_size": 64, "head_dim": 16, "n_groups": 1, "state_size": 16, "num_hidden_layers": 2, "vocab_size": 10})",
                        "num_heads = 128 (the HF default); expected expand * hidden_size / head_dim = 8");
  expect_config_refused(R"({"hidden_size": 64, "num_heads": 8, "head_dim": 16, "num_hidden_layers": 2, "vocab_size": 10})",
                        "missing key 'n_groups'");
  expect_config_refused(std::string("{") + kSsSmall + R"(, "ssm_cfg": {"layer": "Mamba2", "headdim": 16.0}})",
                        "key 'ssm_cfg.headdim': expected an integer, got 16.0");
  expect_config_refused(R"({"d_model": 4294967296, "n_layer": 2, "vocab_size": 10, "ssm_cfg": {"layer": "Mamba2"}})",
                        "expected an integer in the int range");
  // The HF layer_norm_epsilon is applied (it is the block's norm epsilon).
  EXPECT_EQ(mamba2::parse_config_text(hf + R"(, "layer_norm_epsilon": 1e-6})", "x").eps, 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Vocabulary

TEST(Mamba2Vocab, BothLayoutsOfAReleasedModelDrawTheSameIds) {
  const mamba2::Config ss = mamba2::parse_config_text(kSs130m, "ss.json");
  const mamba2::Config hf = mamba2::parse_config_text(kHf130m, "hf.json");
  EXPECT_EQ(ss.vocab_size, 50277);
  EXPECT_EQ(hf.vocab_size, 50277);
  EXPECT_EQ(ss.vocab_padded(), 50288);
  EXPECT_EQ(hf.vocab_padded(), 50288);
  EXPECT_NE(hf.vocab_rule.find("state-spaces/mamba2-130m"), std::string::npos) << hf.vocab_rule;
  const auto a = mamba2::draw_token_ids(static_cast<std::uint64_t>(ss.vocab_size), 50, 50, 0);
  const auto b = mamba2::draw_token_ids(static_cast<std::uint64_t>(hf.vocab_size), 50, 50, 0);
  EXPECT_EQ(a, b);
  // Every released size, in both layouts.
  for (const std::string size : {"130m", "370m", "780m", "1.3b", "2.7b"}) {
    const mamba2::Config n = mamba2::Config::named(size);
    const std::string hf_text = "{\"hidden_size\": " + std::to_string(n.d_model) + ", \"num_hidden_layers\": " +
                                std::to_string(n.n_layer) + ", \"num_heads\": " + std::to_string(n.nheads()) +
                                ", \"n_groups\": 1, \"vocab_size\": 50288, \"time_step_limit\": [0.0, Infinity]}";
    const mamba2::Config h = mamba2::parse_config_text(hf_text, "hf");
    const mamba2::Config s = mamba2::parse_config_text(n.to_json().dump(), "ss");
    EXPECT_EQ(h.vocab_size, 50277) << size;
    EXPECT_EQ(s.vocab_size, 50277) << size;
    EXPECT_EQ(mamba2::draw_token_ids(static_cast<std::uint64_t>(h.vocab_size), 3, 7, 11),
              mamba2::draw_token_ids(static_cast<std::uint64_t>(s.vocab_size), 3, 7, 11));
  }
  // Ids really reach the top of the vocabulary and never the padding rows.
  const auto many = mamba2::draw_token_ids(50277, 400, 500, 1);
  EXPECT_EQ(*std::max_element(many.begin(), many.end()) < 50277, true);
  EXPECT_GT(*std::max_element(many.begin(), many.end()), 50277 - 50);
}

TEST(Mamba2Vocab, OtherHuggingFaceConfigsKeepTheirVocabSize) {
  // Not a released model (other sizes): the whole embedding counts, and the rule says so.
  const mamba2::Config c = mamba2::parse_config_text(std::string("{") + kHfSmall + "}", "x");
  EXPECT_EQ(c.vocab_size, 1008);
  EXPECT_EQ(c.vocab_padded(), 1008);
  EXPECT_NE(c.vocab_rule.find("unknown to tokdyn"), std::string::npos) << c.vocab_rule;
  // A released size with a different vocabulary is not in the table either.
  const mamba2::Config o = mamba2::parse_config_text(
      R"({"hidden_size": 768, "num_hidden_layers": 24, "num_heads": 24, "n_groups": 1, "vocab_size": 32000})", "x");
  EXPECT_EQ(o.vocab_size, 32000);
  // Nor one with other state sizes.
  const mamba2::Config g = mamba2::parse_config_text(
      R"({"hidden_size": 768, "num_hidden_layers": 24, "num_heads": 24, "n_groups": 2, "vocab_size": 50288})", "x");
  EXPECT_EQ(g.vocab_size, 50288);
}
