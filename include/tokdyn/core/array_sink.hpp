#pragma once
// Where recorded arrays go. An observer (StateTapObserver) or a model's tap (observers.hpp ArrayTapObserver)
// hands each array it records to a sink: a name (a relative path without extension, e.g.
// "layer_12"), the data in C order and its shape. Models and observers never open files; the sink
// decides where an array lands (io/npy.hpp: NpyFolderSink writes <folder>/<name>.npy; a test or
// the Python package may keep the arrays in memory instead).
#include <cstddef>
#include <string>
#include <vector>

namespace tokdyn {

class ArraySink {
 public:
  virtual ~ArraySink() = default;
  virtual void put(const std::string& name, const double* data, const std::vector<std::size_t>& shape) = 0;
  virtual void put(const std::string& name, const float* data, const std::vector<std::size_t>& shape) = 0;
};

}  // namespace tokdyn
