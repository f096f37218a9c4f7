#pragma once
// What the translation units of the Python module tokdyn._core share (apps/python/module*.cpp):
// the array conventions and helpers (float64 C-contiguous arrays, NumPy copies, shapes in
// messages, library refusals as ValueError), the Model class (defined in module_models.cpp, used
// by the depth spectrum of a model in module_analyses.cpp), and the bind_* functions that
// module.cpp's PYBIND11_MODULE calls, in the order the bindings are registered. Every translation
// unit sees the same pybind11 type casters (stl, filesystem, numpy).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokdyn/core/error.hpp"
#include "tokdyn/engine/dynamics.hpp"
#include "tokdyn/runtime/experiment.hpp"
#include "tokdyn/runtime/model_registry.hpp"

namespace py = pybind11;

namespace tokdyn::python {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

inline const ModelDescriptor& descriptor(const std::string& name) {
  try {
    return model_descriptor(name);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
}

inline std::size_t element_count(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t x : shape) n *= x;
  return n;
}

/// A float64 array of `shape` holding a copy of `data`.
inline py::array_t<double> to_numpy(const double* data, const std::vector<std::size_t>& shape) {
  std::vector<py::ssize_t> s(shape.begin(), shape.end());
  py::array_t<double> a(s);
  std::copy(data, data + element_count(shape), a.mutable_data());
  return a;
}

inline std::vector<std::size_t> shape_of(const py::array& a) {
  std::vector<std::size_t> s;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s.push_back(static_cast<std::size_t>(a.shape(i)));
  return s;
}

inline std::string shape_text(const py::array& a) { return fmt::format("[{}]", fmt::join(shape_of(a), ", ")); }

/// Library refusals of values (std::invalid_argument / domain_error) as InputError, so that they
/// reach Python as ValueError with the library's message.
template <class F>
auto checked(F&& f) {
  using R = decltype(f());
  if constexpr (std::is_void_v<R>) {
    as_input_error([&] { f(); });
  } else {
    std::optional<R> out;
    as_input_error([&] { out.emplace(f()); });
    return std::move(*out);
  }
}

/// Captures one tap at one layer while armed (a model keeps one, watching from its construction).
class CaptureTap final : public TapObserver {
 public:
  void arm(std::string name, long k, std::vector<int> heads) {
    name_ = std::move(name), k_ = k, heads_ = std::move(heads);
    value.clear(), shape.clear();
  }
  void disarm() { name_.clear(); }
  bool wants(const std::string& name, long k) const override { return !name_.empty() && name == name_ && k == k_; }
  std::vector<int> heads(const std::string& name, long) const override { return name == name_ ? heads_ : std::vector<int>{}; }
  void tap(const std::string&, long, const double* data, const std::vector<std::size_t>& s) override {
    value.assign(data, data + element_count(s));
    shape = s;
  }
  void tap(const std::string&, long, const float* data, const std::vector<std::size_t>& s) override {
    value.assign(data, data + element_count(s));
    shape = s;
  }
  std::vector<double> value;
  std::vector<std::size_t> shape;

 private:
  std::string name_;
  long k_ = 0;
  std::vector<int> heads_;
};

class Model {
 public:
  Model(const std::string& name, const std::map<std::string, std::string>& knobs, const std::string& dir);

  const std::string& name() const { return name_; }
  std::vector<std::string> tap_names() const { return S_.map->tap_names(); }
  bool on_sphere() const { return S_.map->on_sphere(); }
  std::string notes() const { return notes_; }
  py::dict knobs() const;

  /// [rows, d], or [runs, rows, d] for a model built from several runs of token ids.
  py::array_t<double> x0() const;

  /// X [runs, rows, d] or [rows, d] -> the state after layer `layer` (same shape).
  py::array_t<double> step(const Array& X, long layer) const;

  /// The tangent map of layer `layer` at X [rows, d] applied to k tangents V [k, rows, d].
  py::array_t<double> jvp(const Array& X, const Array& V, long layer) const;

  /// Layers 1..depth from X0 [runs, rows, d] (or [rows, d]); returns {layer: state} for the layers
  /// `taps` selects (parse_taps syntax: "all", "0,10:100:10"), in the model's precision widened to double.
  py::dict trajectory(const Array& X0, long depth, const std::string& taps) const;

  /// The internal quantity `name` of layer `layer` at the state X entering it ([runs, rows, d]).
  py::array_t<double> tap(const std::string& name, const Array& X, long layer, const std::vector<int>& heads) const;

  const ModelInstance& instance() const { return S_; }
  std::size_t dim() const { return static_cast<std::size_t>(S_.Z0.Z.cols()); }

 private:
  std::string name_;
  Params P_;
  ModelInstance S_;
  std::string notes_;
  std::unique_ptr<CaptureTap> capture_;  // watches the map from construction; armed by tap()

  void check_layer(long layer) const;
  void apply(long layer, Batch& Z) const;
  Batch batch_of(const Array& X, const char* what) const;
};

// The bindings, by what they hold (module.cpp calls them in this order).
void bind_runs(py::module_& mod);        // module_runs.cpp: the presets and their runs
void bind_models(py::module_& mod);      // module_models.cpp: the registry's models
void bind_analyses(py::module_& mod);    // module_analyses.cpp: the analyses of NumPy arrays and models
void bind_tokenizers(py::module_& mod);  // module_tokenizers.cpp: checkpoints' tokenizers

}  // namespace tokdyn::python
