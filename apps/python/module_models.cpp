// tokdyn._core's models (see module.cpp): the registry's model names and schemas, and the class
// Model (a model built from its knobs: its start state, one layer's step, the tangent map, a
// trajectory over the layers, a tap at one layer), with the sinks it keeps what a run hands out in.
#include "module_internal.hpp"
#include "module_interrupt.hpp"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/core/array_sink.hpp"
#include "tokdyn/core/error.hpp"
#include "tokdyn/engine/drivers.hpp"
#include "tokdyn/engine/observers.hpp"
#include "tokdyn/experiments/taps.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"

namespace tokdyn::python {
namespace {

// ---- models ----

/// Keeps the arrays a run hands to it, in memory (the package's taps).
class MemorySink final : public ArraySink {
 public:
  void put(const std::string& name, const double* data, const std::vector<std::size_t>& shape) override {
    arrays[name] = {std::vector<double>(data, data + element_count(shape)), shape};
  }
  void put(const std::string& name, const float* data, const std::vector<std::size_t>& shape) override {
    arrays[name] = {std::vector<double>(data, data + element_count(shape)), shape};  // fp32 values, exactly widened
  }
  std::map<std::string, std::pair<std::vector<double>, std::vector<std::size_t>>> arrays;
};

/// The parameters a model is built from: its knobs, and the tokens, seed and depth every builder reads.
Experiment model_schema(const ModelDescriptor& m) {
  Experiment e;
  e.name = "model " + m.name;
  e.params = m.knobs;
  e.params.push_back(p_int("tokens", 8, "tokens per sequence", 1, 1 << 20));
  e.params.push_back(p_int("seed", 0, "seed of the start tokens and random weights", 0, kMaxSeed));
  e.params.push_back(p_int("depth", 100, "layers the model is built for (untied random Transformer weights)", 1, 10000000));
  return e;
}

}  // namespace

Model::Model(const std::string& name, const std::map<std::string, std::string>& knobs, const std::string& dir) : name_(name) {
  const ModelDescriptor& m = descriptor(name);
  const Experiment e = model_schema(m);
  const std::vector<std::pair<std::string, std::string>> v(knobs.begin(), knobs.end());
  P_ = resolve_params(e, v);
  RunContext ctx;
  ctx.dir = dir;
  S_ = checked([&] { return build_model(name, P_, ctx); });
  notes_ = S_.notes.dump();
  capture_ = std::make_unique<CaptureTap>();
  if (!S_.map->tap_names().empty()) S_.map->watch(capture_.get());
}

py::dict Model::knobs() const {
  py::dict d;
  for (const auto& [k, v] : P_.values_) d[py::str(k)] = value_text(v);
  return d;
}

/// [rows, d], or [runs, rows, d] for a model built from several runs of token ids.
py::array_t<double> Model::x0() const {
  if (S_.Z0.runs > 1)
    return to_numpy(S_.Z0.Z.data(), {static_cast<std::size_t>(S_.Z0.runs), static_cast<std::size_t>(S_.Z0.len), dim()});
  return to_numpy(S_.Z0.Z.data(), {static_cast<std::size_t>(S_.Z0.len), dim()});
}

/// X [runs, rows, d] or [rows, d] -> the state after layer `layer` (same shape).
py::array_t<double> Model::step(const Array& X, long layer) const {
  Batch Z = batch_of(X, "X");
  check_layer(layer);
  {
    py::gil_scoped_release release;
    checked([&] { apply(layer, Z); });
  }
  return to_numpy(Z.Z.data(), shape_of(X));
}

/// The tangent map of layer `layer` at X [rows, d] applied to k tangents V [k, rows, d].
py::array_t<double> Model::jvp(const Array& X, const Array& V, long layer) const {
  const Batch Z = batch_of(X, "X");
  if (Z.runs != 1) throw InputError(fmt::format("X: shape {}; expected one state [rows, d] for jvp", shape_text(X)));
  check_layer(layer);
  if (V.ndim() != 3 || static_cast<int>(V.shape(1)) != Z.len || V.shape(2) != Z.Z.cols())
    throw InputError(fmt::format("V: shape {}; expected [k, rows, d] = [k, {}, {}]", shape_text(V), Z.len, Z.Z.cols()));
  const auto k = static_cast<int>(V.shape(0));
  Tokens Vt = Eigen::Map<const Tokens>(V.data(), static_cast<Eigen::Index>(k) * Z.len, Z.Z.cols());
  Tokens W;
  {
    py::gil_scoped_release release;
    checked([&] {
      const Batch Zrep{Z.Z.replicate(k, 1), k, Z.len};
      if (S_.step) {
        Batch next;
        S_.step(layer, Z, Zrep, Vt, next, W);
      } else {
        S_.map->jvp(layer, Zrep, Vt, W);
      }
    });
  }
  return to_numpy(W.data(), shape_of(V));
}

/// Layers 1..depth from X0 [runs, rows, d] (or [rows, d]); returns {layer: state} for the layers
/// `taps` selects (parse_taps syntax: "all", "0,10:100:10"), in the model's precision widened to double.
py::dict Model::trajectory(const Array& X0, long depth, const std::string& taps) const {
  if (depth < 1) throw InputError(fmt::format("depth: expected an integer >= 1, got {}", depth));
  const std::vector<long> layers = parse_taps(taps, depth);
  auto sink = std::make_shared<MemorySink>();
  SignalWatch watch;  // Ctrl-C: KeyboardInterrupt within a layer (module_interrupt.hpp)
  watch.run([&] {
    Batch Z = batch_of(X0, "X0");
    py::gil_scoped_release release;
    checked([&] {
      StateTapObserver obs(sink, layers);
      if (S_.map->float_state()) {
        BatchF ZF{Z.Z.cast<float>(), Z.runs, Z.len};
        iterate(*S_.map, ZF, depth, {&obs}, {}, watch.hook());
      } else {
        iterate(*S_.map, Z, depth, {&obs}, {}, watch.hook());
      }
    });
  });
  py::dict out;
  for (long k : layers) {
    const auto& [data, shape] = sink->arrays.at(fmt::format("layer_{}", k));
    out[py::int_(k)] = to_numpy(data.data(), shape);
  }
  return out;
}

/// The internal quantity `name` of layer `layer` at the state X entering it ([runs, rows, d]).
py::array_t<double> Model::tap(const std::string& name, const Array& X, long layer, const std::vector<int>& heads) const {
  bool offered = false;
  std::vector<std::string> names;
  for (const std::string& t : S_.map->tap_names()) {
    names.push_back(t.substr(0, t.find(' ')));
    offered = offered || names.back() == name;
  }
  if (!offered)
    throw InputError(fmt::format("tap '{}': model {} offers {}", name, name_, names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
  Batch Z = batch_of(X, "X");
  check_layer(layer);
  CaptureTap& cap = *capture_;
  cap.arm(name, layer, heads);
  {
    py::gil_scoped_release release;
    try {
      checked([&] { apply(layer, Z); });
    } catch (...) {
      cap.disarm();
      throw;
    }
  }
  cap.disarm();
  if (cap.shape.empty()) throw InputError(fmt::format("tap '{}': model {} did not hand it out at layer {}", name, name_, layer));
  return to_numpy(cap.value.data(), cap.shape);
}

void Model::check_layer(long layer) const {
  if (layer < 1) throw InputError(fmt::format("layer: expected an integer >= 1 (layer 1 maps x(0) to x(1)), got {}", layer));
}

void Model::apply(long layer, Batch& Z) const {
  if (S_.map->float_state()) {
    BatchF ZF{Z.Z.cast<float>(), Z.runs, Z.len};
    S_.map->apply_float(layer, ZF);
    Z.Z = ZF.Z.cast<double>();
  } else {
    S_.map->apply(layer, Z);
  }
}

Batch Model::batch_of(const Array& X, const char* what) const {
  const auto rows = static_cast<std::size_t>(S_.Z0.len);
  if (X.ndim() == 2 && static_cast<std::size_t>(X.shape(0)) == rows && static_cast<std::size_t>(X.shape(1)) == dim())
    return Batch{Eigen::Map<const Tokens>(X.data(), X.shape(0), X.shape(1)), 1, static_cast<int>(rows)};
  if (X.ndim() == 3 && static_cast<std::size_t>(X.shape(1)) == rows && static_cast<std::size_t>(X.shape(2)) == dim() && X.shape(0) >= 1)
    return Batch{Eigen::Map<const Tokens>(X.data(), X.shape(0) * X.shape(1), X.shape(2)), static_cast<int>(X.shape(0)),
                 static_cast<int>(rows)};
  throw InputError(fmt::format("{}: shape {}; expected [rows, d] or [runs, rows, d] with rows = {}, d = {} for model {}", what,
                               shape_text(X), rows, dim(), name_));
}

void bind_models(py::module_& mod) {
  mod.def("model_names", &model_names);
  mod.def("model_schema_json", [](const std::string& name) {
    nlohmann::json j = schema_json(model_schema(descriptor(name)));
    j["description"] = model_descriptor(name).description;
    j["taps"] = model_descriptor(name).taps;
    j["schedule_knobs"] = model_descriptor(name).schedule_knobs;
    return j.dump();
  });

  py::class_<Model>(mod, "Model")
      .def(py::init<const std::string&, const std::map<std::string, std::string>&, const std::string&>(), py::arg("name"),
           py::arg("knobs"), py::arg("dir"))
      .def_property_readonly("name", &Model::name)
      .def_property_readonly("tap_names", &Model::tap_names)
      .def_property_readonly("on_sphere", &Model::on_sphere)
      .def_property_readonly("notes_json", &Model::notes)
      .def_property_readonly("knobs", &Model::knobs)
      .def("x0", &Model::x0)
      .def("step", &Model::step, py::arg("X"), py::arg("layer"))
      .def("jvp", &Model::jvp, py::arg("X"), py::arg("V"), py::arg("layer"))
      .def("trajectory", &Model::trajectory, py::arg("X0"), py::arg("depth"), py::arg("taps"))
      .def("tap", &Model::tap, py::arg("name"), py::arg("X"), py::arg("layer"), py::arg("heads"));
}

}  // namespace tokdyn::python
