// The model registry (runtime/model_registry.hpp): one descriptor per depth model. Each
// descriptor's build is the whole of what an analysis needs to know about the model.
#include "tokdyn/runtime/model_registry.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <memory>
#include <stdexcept>

#include "tokdyn/core/error.hpp"
#include "tokdyn/runtime/prompts.hpp"
#include "tokdyn/models/transformer/setup.hpp"
#include "tokdyn/io/csv.hpp"
#include "tokdyn/models/mamba2/checkpoint.hpp"
#include "tokdyn/io/npy.hpp"
#include "tokdyn/models/decoder/decoder.hpp"
#include "tokdyn/models/hierarchical/hierarchical.hpp"
#include "tokdyn/models/mamba2/mamba2.hpp"
#include "tokdyn/models/rope/attention.hpp"
#include "tokdyn/models/ssm/ssm.hpp"
#include "tokdyn/models/ssm/random.hpp"
#include "tokdyn/core/rng.hpp"
#include "tokdyn/engine/schedule.hpp"

namespace tokdyn {
// ---- the parts ----

SsmRandomSpec ssm_random_spec(const Params& P) {
  SsmRandomSpec spec;
  spec.n = static_cast<int>(P.get_int("n"));
  spec.m = static_cast<int>(P.get_int("m"));
  spec.weights = P.get_string("weights");
  spec.sigma = P.get_double("sigma");
  return spec;
}

std::shared_ptr<IidSchedule<SsmParams>> ssm_random_schedule(const Params& P, long redraw) {
  const SsmRandomSpec spec = ssm_random_spec(P);
  const auto seed = static_cast<std::uint64_t>(P.get_int("seed"));
  return std::make_shared<IidSchedule<SsmParams>>([spec](Rng& rng) { return draw_ssm_layer(spec, rng); }, seed ^ 0x5eedf00dULL,
                                                  redraw);
}

Batch sphere_start(std::uint64_t seed, int runs, int len, int d, bool hemisphere) {
  Batch Z{Tokens(static_cast<Eigen::Index>(runs) * len, d), runs, len};
  for (int r = 0; r < runs; ++r) {
    Rng rng(seed, {static_cast<std::uint64_t>(r)});
    Tokens X = rng.sphere_tokens(len, d);
    if (hemisphere)
      for (int i = 0; i < len; ++i) X(i, 0) = std::abs(X(i, 0));
    Z.run(r) = X;
  }
  return Z;
}

rope::AttentionParams rope_attention_params(const Params& P, int tokens, const std::string& who) {
  rope::AttentionParams AP;
  AP.d = static_cast<int>(P.get_int("d"));
  AP.beta = P.get_double("beta");
  AP.rope = P.get_bool("rope");
  AP.causal = P.get_bool("causal");
  AP.heads = static_cast<int>(P.get_int("heads"));
  AP.freqs = P.get_double_list("freqs");
  AP.positions = P.get_double_list("positions");
  AP.validate(tokens, who);
  return AP;
}

mamba2::Model mamba2_model(const Params& P) {
  const std::string ck = P.get_string("checkpoint");
  if (!ck.empty()) return mamba2::load(ck);
  return mamba2::init_model(mamba2::Config::named(P.get_string("size")), static_cast<std::uint64_t>(P.get_int("model_seed")));
}

std::optional<mamba2::Config> mamba2_config(const Params& P) {
  const std::string ck = P.get_string("checkpoint");
  if (ck.empty()) return mamba2::Config::named(P.get_string("size"));
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::is_directory(ck, ec) ? std::filesystem::path(ck) : std::filesystem::path(ck).parent_path();
  if (!std::filesystem::exists(dir / "config.json", ec)) return std::nullopt;
  return mamba2::parse_config(dir / "config.json");
}

namespace {
/// The prompts' ids as the run's token ids, recorded in the manifest (text, pieces, tokenizer).
std::vector<std::int64_t> prompt_ids_for_run(const PromptTokens& pt, long rows, int len, RunContext& ctx, std::string& drawn_from) {
  if (pt.len != len) throw std::logic_error("prompt ids: the caller's token count is not the prompts'");
  check_prompt_ids(pt, rows);
  drawn_from = fmt::format("the {} ({} tokens each, tokenizer {})", pt.runs == 1 ? "prompt" : fmt::format("{} prompts", pt.runs),
                           pt.len, pt.tokenizer);
  ctx.notes["text"] = pt.manifest();
  return pt.ids;
}
}  // namespace

std::vector<std::int64_t> model_token_ids(const Params& P, long rows, long vocab_real, int& runs, int len, RunContext& ctx,
                                          std::string& drawn_from, const PromptTokens* prompts) {
  std::vector<std::int64_t> ids;
  const std::string idfile = P.get_string("token_ids");
  if (prompts) {
    ids = prompt_ids_for_run(*prompts, rows, len, ctx, drawn_from);
    runs = prompts->runs;
  } else if (!idfile.empty()) {
    std::vector<std::size_t> shape;
    // At most 65536 runs of len ids: a larger file is refused from its header, before it is read.
    ids = read_npy_int(idfile, shape, 65536ull * static_cast<std::uint64_t>(len));
    if (shape.size() != 2 || shape[1] != static_cast<std::size_t>(len) || shape[0] == 0)
      throw InputError(fmt::format("{}: token ids have shape [{}]; expected [runs, tokens] with tokens = {}", idfile,
                                   fmt::join(shape, ", "), len));
    runs = static_cast<int>(shape[0]);
    for (std::int64_t id : ids)
      if (id < 0 || id >= rows)
        throw InputError(fmt::format("{}: token id {} out of range; expected ids in [0, {})", idfile, id, rows));
    drawn_from = "given (token_ids)";
  } else {
    long vocab = P.get_int("vocab");
    if (vocab == 0) vocab = vocab_real;
    if (vocab > rows) throw InputError(fmt::format("parameter 'vocab': the embedding has {} rows, got {}", rows, vocab));
    ids = decoder::draw_token_ids(static_cast<std::uint64_t>(vocab), runs, len, static_cast<std::uint64_t>(P.get_int("seed")));
    drawn_from = fmt::format("[0, {})", vocab);
  }
  write_npy(ctx.dir / "token_ids.npy", ids.data(), {static_cast<std::size_t>(runs), static_cast<std::size_t>(len)});
  return ids;
}

std::vector<std::int64_t> mamba2_token_ids(const Params& P, const mamba2::Model& m, int runs, int len, RunContext& ctx,
                                           std::string& drawn_from, const PromptTokens* prompts) {
  std::vector<std::int64_t> ids;
  const std::string idfile = P.get_string("token_ids");
  if (prompts) {
    if (prompts->runs != runs) throw std::logic_error("prompt ids: the caller's run count is not the prompts'");
    ids = prompt_ids_for_run(*prompts, m.embedding.rows(), len, ctx, drawn_from);
  } else if (!idfile.empty()) {
    std::vector<std::size_t> shape;
    // At most runs * tokens ids: a larger file is refused from its header, before it is read.
    ids = read_npy_int(idfile, shape, static_cast<std::uint64_t>(runs) * static_cast<std::uint64_t>(len));
    if (shape.size() != 2 || shape[0] != static_cast<std::size_t>(runs) || shape[1] != static_cast<std::size_t>(len))
      throw InputError(fmt::format("{}: token ids have shape [{}]; expected [runs, tokens] = [{}, {}]", idfile,
                                   fmt::join(shape, ", "), runs, len));
    for (std::int64_t id : ids)
      if (id < 0 || id >= m.embedding.rows())
        throw InputError(fmt::format("{}: token id {} out of range; expected ids in [0, {})", idfile, id, m.embedding.rows()));
    drawn_from = "given (token_ids)";
  } else {
    // The default range is the model's real vocabulary (50277 for the released models, in either
    // config layout; Config::vocab_rule says how it was found), not the padded embedding rows.
    long vocab = P.get_int("vocab");
    if (vocab == 0) vocab = m.cfg.vocab_size;
    if (vocab > m.embedding.rows())
      throw InputError(fmt::format("parameter 'vocab': the embedding has {} rows, got {}", m.embedding.rows(), vocab));
    ids = mamba2::draw_token_ids(static_cast<std::uint64_t>(vocab), runs, len, static_cast<std::uint64_t>(P.get_int("seed")));
    drawn_from = fmt::format("[0, {})", vocab);
  }
  write_npy(ctx.dir / "token_ids.npy", ids.data(), {static_cast<std::size_t>(runs), static_cast<std::size_t>(len)});
  return ids;
}

ParamSpec model_knob(const std::string& model, const std::string& key) {
  for (const ParamSpec& q : model_descriptor(model).knobs)
    if (q.key == key) return q;
  throw std::logic_error(fmt::format("model registry: model '{}' has no knob '{}'", model, key));
}

ParamSpec model_knob(const std::string& model, const std::string& key, ParamValue def, std::string help) {
  ParamSpec q = model_knob(model, key);
  if (def.index() != q.def.index())
    throw std::logic_error(fmt::format("model registry: a default of the wrong type for knob '{}' of '{}'", key, model));
  q.def = std::move(def);
  if (!help.empty()) q.help = std::move(help);
  return q;
}

bool ModelDescriptor::has_tap(const std::string& t) const { return std::find(taps.begin(), taps.end(), t) != taps.end(); }

namespace {
std::vector<std::pair<int, std::function<std::vector<ModelDescriptor>()>>>& registered_models() {
  static std::vector<std::pair<int, std::function<std::vector<ModelDescriptor>()>>> v;
  return v;
}
}  // namespace

ModelRegistration::ModelRegistration(int order, std::function<std::vector<ModelDescriptor>()> make) {
  registered_models().emplace_back(order, std::move(make));
}

const std::vector<ModelDescriptor>& model_registry() {
  static const std::vector<ModelDescriptor> r = [] {
    std::vector<std::pair<int, ModelDescriptor>> all;
    for (const auto& [order, make] : registered_models())
      for (ModelDescriptor& m : make()) all.emplace_back(order, std::move(m));
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second.name < b.second.name;
    });
    std::vector<ModelDescriptor> v;
    for (auto& [order, m] : all) v.push_back(std::move(m));
    return v;
  }();
  return r;
}

std::vector<ArrayDecl> model_arrays(const std::string& model_key, const std::vector<std::string>& only) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> by_file;  // file -> (description, models)
  for (const ModelDescriptor& m : model_registry()) {
    if (!only.empty() && std::find(only.begin(), only.end(), m.name) == only.end()) continue;
    for (const ArrayDecl& a : m.writes) {
      auto [it, fresh] = by_file.try_emplace(a.pattern, a.description, std::vector<std::string>{});
      if (fresh) order.push_back(a.pattern);
      it->second.second.push_back(m.name);
    }
  }
  std::vector<ArrayDecl> out;
  for (const std::string& f : order) {
    const auto& [description, models] = by_file.at(f);
    std::string who;
    for (std::size_t i = 0; i < models.size(); ++i)
      who += (i == 0 ? "" : i + 1 == models.size() ? " or " : ", ") + models[i];
    out.emplace_back(f, description, fmt::format("{} = {}", model_key, who));
  }
  return out;
}

std::vector<std::string> model_names() {
  std::vector<std::string> n;
  for (const ModelDescriptor& m : model_registry()) n.push_back(m.name);
  return n;
}

const ModelDescriptor& model_descriptor(const std::string& name) {
  for (const ModelDescriptor& m : model_registry())
    if (m.name == name) return m;
  throw std::invalid_argument(fmt::format("model '{}': expected one of {}", name, fmt::join(model_names(), ", ")));
}

std::vector<std::string> models_with_checkpoints() {
  std::vector<std::string> n;
  for (const ModelDescriptor& m : model_registry())
    if (m.make_checkpoint) n.push_back(m.name);
  return n;
}

ModelInstance build_model(const std::string& name, const Params& P, RunContext& ctx) {
  const ModelDescriptor& m = model_descriptor(name);
  for (const ParamSpec& q : m.knobs) {
    if (!P.is_explicit(q.key)) continue;
    // The union of the models' knobs may take more choices or a wider range than this model's own.
    const auto vit = P.values_.find(q.key);
    if (vit != P.values_.end()) {
      const ParamValue& v = vit->second;
      if (!q.choices.empty() && std::holds_alternative<std::string>(v) &&
          std::find(q.choices.begin(), q.choices.end(), std::get<std::string>(v)) == q.choices.end())
        throw InputError(fmt::format("parameter '{}' = {}: model={} takes one of {}", q.key, std::get<std::string>(v), name,
                                     fmt::join(q.choices, ", ")));
      double x = 0;
      bool num = false;
      if (std::holds_alternative<long>(v)) x = static_cast<double>(std::get<long>(v)), num = true;
      if (std::holds_alternative<double>(v)) x = std::get<double>(v), num = true;
      if (num && ((q.min && (x < *q.min || (q.min_exclusive && x == *q.min))) || (q.max && (x > *q.max || (q.max_exclusive && x == *q.max)))))
        throw InputError(fmt::format("parameter '{}' = {}: model={} takes {}{} .. {}{}", q.key, value_text(v), name,
                                     q.min_exclusive ? "(" : "[", q.min ? value_text(ParamValue(*q.min)) : std::string("-inf"),
                                     q.max ? value_text(ParamValue(*q.max)) : std::string("inf"), q.max_exclusive ? ")" : "]"));
    }
    for (const ParamCondition& c : q.only_when) {
      const auto it = P.values_.find(c.key);
      if (it == P.values_.end()) continue;
      const std::string now = value_text(it->second);
      if ((std::find(c.values.begin(), c.values.end(), now) != c.values.end()) != c.negate) continue;
      std::vector<std::string> vs;
      for (const std::string& v : c.values) vs.push_back(v.empty() ? std::string("empty") : v);
      throw InputError(fmt::format("parameter '{}' does not apply to model={} when {} = {}: it applies only when {} is {}{} "
                                   "(leave '{}' unset)",
                                   q.key, name, c.key, now.empty() ? std::string("'' (empty)") : now, c.key,
                                   c.negate ? "not " : "", fmt::join(vs, c.negate ? " nor " : " or "), q.key));
    }
  }
  return m.build(P, ctx);
}

std::vector<std::string> models_with_tap(const std::string& t) {
  std::vector<std::string> n;
  for (const ModelDescriptor& m : model_registry())
    if (m.has_tap(t)) n.push_back(m.name);
  return n;
}

std::vector<std::string> model_knob_conflicts() {
  std::vector<std::string> out;
  std::map<std::string, std::pair<std::string, ParamType>> first;
  for (const ModelDescriptor& m : model_registry())
    for (const ParamSpec& q : m.knobs) {
      const auto [it, fresh] = first.emplace(q.key, std::make_pair(m.name, q.type));
      if (!fresh && it->second.second != q.type)
        out.push_back(fmt::format("knob '{}' of {} has another type than {}'s", q.key, m.name, it->second.first));
    }
  return out;
}

std::vector<ParamSpec> model_knobs(const std::string& model_key, const std::vector<std::string>& only) {
  std::vector<ParamSpec> out;
  std::map<std::string, std::vector<std::string>> owners;
  for (const ModelDescriptor& m : model_registry()) {
    if (!only.empty() && std::find(only.begin(), only.end(), m.name) == only.end()) continue;
    for (const ParamSpec& q : m.knobs) {
      auto it = std::find_if(out.begin(), out.end(), [&](const ParamSpec& p) { return p.key == q.key; });
      if (it == out.end()) {
        out.push_back(q);
        out.back().help = m.name + ": " + q.help;
      } else {
        // A type conflict is a registry error (model_knob_conflicts; a test keeps it empty): the
        // first model's spec is kept. Other differences are the union: the other model's default
        // as a default under model=..., its choices added, the widest range (build_model checks
        // each model's own).
        if (it->type != q.type) {
          owners[q.key].push_back(m.name);
          continue;
        }
        if (!(it->def == q.def)) {
          it->def_when.push_back({ParamCondition{model_key, {m.name}, false}, q.def});
          it->help += fmt::format(" [default {} for model={}]", value_text(q.def), m.name);
        }
        if (!it->choices.empty() || !q.choices.empty()) {
          if (it->choices.empty() || q.choices.empty()) it->choices.clear();
          else
            for (const std::string& c : q.choices)
              if (std::find(it->choices.begin(), it->choices.end(), c) == it->choices.end()) it->choices.push_back(c);
        }
        if (it->min && (!q.min || *q.min < *it->min)) it->min = q.min;
        if (it->max && (!q.max || *q.max > *it->max)) it->max = q.max;
        it->help += "; " + m.name + ": " + q.help;
      }
      owners[q.key].push_back(m.name);
    }
  }
  // A key several models share whose own conditions differ between them (Mamba-2's tau applies with
  // update=sphere, the SSM's always) cannot state them in one spec: the union applies per model,
  // and build_model refuses what a model's own condition excludes.
  for (ParamSpec& q : out) {
    const std::vector<std::string>& who = owners[q.key];
    bool same = true;
    for (const std::string& o : who) {
      const ParamSpec own = model_knob(o, q.key);
      if (own.type != q.type) continue;  // a conflict (model_knob_conflicts), not merged
      if (own.only_when.size() != q.only_when.size()) same = false;
      for (std::size_t i = 0; same && i < own.only_when.size(); ++i)
        same = own.only_when[i].key == q.only_when[i].key && own.only_when[i].values == q.only_when[i].values &&
               own.only_when[i].negate == q.only_when[i].negate;
    }
    if (!same) q.only_when.clear();
    q.only_when.push_back({model_key, who, false});
  }
  return out;
}

}  // namespace tokdyn
