// tokdyn._core: the library from Python (pybind11). The presets and their results, the registry's
// models (step, jvp, trajectory, taps), and the analyses as functions of NumPy arrays, including
// the depth spectrum of a model the user defines by Python callbacks. The package python/tokdyn
// wraps this module (pandas tables, named axes, docstrings); docs/python.md explains it.
//
// Conventions: arrays are float64 C-contiguous (converted when not: pybind11's forcecast); the GIL
// is released while the library computes (callbacks take it back); errors are the CLI's one-line
// messages, as tokdyn.Error's subclasses by the CLI's exit code (tokdyn.InputError, a ValueError, for
// bad input; ResourceError, NonFiniteError, ConvergenceError, ... RuntimeErrors for the rest).
//
// Ctrl-C stops the long calls (a run, a depth spectrum, a trajectory) and raises KeyboardInterrupt
// in the caller, with nothing left on disk (module_interrupt.hpp).
//
// This file holds the module's definition; the bindings are in module_runs.cpp (presets and runs),
// module_models.cpp (models), module_analyses.cpp (analyses) and module_tokenizers.cpp
// (tokenizers), their shared helpers in module_internal.hpp.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <exception>
#include <string>

#include "tokdyn/build_info.hpp"
#include "tokdyn/core/error.hpp"
#include "module_internal.hpp"

PYBIND11_MODULE(_core, mod) {
  using namespace tokdyn;
  using namespace tokdyn::python;
  mod.doc() = "tokdyn's C++ core (see the package tokdyn for the documented interface)";
  mod.attr("__version__") = std::string(TOKDYN_VERSION);

  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const py::error_already_set&) {
      throw;
    } catch (...) {
      const Failure f = failure_of(std::current_exception());
      // tokdyn's typed errors (python/tokdyn/_errors.py: tokdyn.Error and one subclass per exit
      // code, each also a ValueError or RuntimeError); the built-ins when the package is absent.
      PyObject* type = f.code == exit_code::bad_input ? PyExc_ValueError : PyExc_RuntimeError;
      py::object cls;
      try {
        const py::dict by_code = py::module_::import("tokdyn._errors").attr("BY_EXIT_CODE");
        if (by_code.contains(py::int_(f.code))) cls = by_code[py::int_(f.code)];
      } catch (const py::error_already_set&) {
        PyErr_Clear();
      }
      PyErr_SetString(cls ? cls.ptr() : type, f.line.c_str());
    }
  });

  bind_runs(mod);
  bind_models(mod);
  bind_analyses(mod);
  bind_tokenizers(mod);
}
