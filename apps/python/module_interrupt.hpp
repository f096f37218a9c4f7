#pragma once
// Ctrl-C in a long call of tokdyn._core (a preset's run, a depth spectrum, a trajectory).
//
// The CLI's interrupt handler (core/interrupt.hpp) cleans up and ends the process; a module must
// instead stop the computation, leave the process as it was and raise KeyboardInterrupt in the
// caller. Python's own SIGINT handler only records the signal (any thread may receive it); its
// Python part runs when the main thread calls PyErr_CheckSignals with the GIL. The library reports
// progress from the thread that drives a computation (the drivers, depth_spectrum, every preset
// through RunContext::progress), so a SignalWatch's hook, called there with the GIL released,
// takes the GIL at most every 50 ms and runs the pending handlers. When one raises (Python's
// default SIGINT handler raises KeyboardInterrupt), the watch keeps that exception and throws
// Interrupted: the library unwinds as on any error, and every temporary folder and lock file is
// removed by its owner (runtime/output_folder.hpp). The binding, with the GIL again, then raises
// the kept exception itself: the caller sees KeyboardInterrupt, not a tokdyn error.
//
// The hook never throws inside an OpenMP parallel region (an exception must not leave one) nor on
// another thread than the caller's: such a stretch of a computation runs to its end first. A
// handler that does not raise (the user's own) lets the computation go on, as in Python code.
#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#include <utility>

#include <omp.h>

#include "tokdyn/engine/drivers.hpp"

namespace tokdyn::python {

/// Unwinds the library after a Python signal handler raised (carries nothing of Python's).
class Interrupted final : public std::exception {
 public:
  const char* what() const noexcept override { return "interrupted: a Python signal handler raised"; }
};

class SignalWatch {
 public:
  /// On the calling thread, with the GIL held.
  SignalWatch() : thread_(std::this_thread::get_id()) {}
  /// With the GIL held (a watch lives in the binding's scope, outside its GIL-released block).
  ~SignalWatch() {
    Py_XDECREF(type_);
    Py_XDECREF(value_);
    Py_XDECREF(traceback_);
  }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  /// From the library, the GIL released: runs Python's pending signal handlers (at most every
  /// 50 ms, or now with `now`) and throws Interrupted once one has raised. The interval bounds the
  /// cost when another Python thread holds the GIL (a wait of up to its switch interval, 5 ms).
  void poll(bool now = false) {
    if (std::this_thread::get_id() != thread_ || omp_in_parallel()) return;
    if (raised_) throw Interrupted();  // again, should a library frame have swallowed the first
    const auto t = std::chrono::steady_clock::now();
    if (!now && t < next_) return;
    next_ = t + std::chrono::milliseconds(50);
    {
      pybind11::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() == 0) return;
      PyErr_Fetch(&type_, &value_, &traceback_);
    }
    raised_ = true;
    throw Interrupted();
  }

  /// A progress function for the library: `inner` (may be empty), then poll().
  ProgressFn hook(ProgressFn inner = {}) {
    return [this, inner = std::move(inner)](double f) {
      if (inner) inner(f);
      poll();
    };
  }

  /// Runs `f` (which releases the GIL around the library's work and calls poll or hook there);
  /// with the GIL held again, a handler's exception is raised as itself (whatever the library made
  /// of the unwinding), else f's own result or exception passes.
  template <class F>
  decltype(auto) run(F&& f) {
    try {
      return f();
    } catch (const pybind11::error_already_set&) {
      throw;  // a callback's own exception (KeyboardInterrupt raised inside a callback included)
    } catch (...) {
      if (raised_) raise();
      throw;
    }
  }

  bool raised() const { return raised_; }

  /// The kept exception as the current Python error (GIL held).
  [[noreturn]] void raise() {
    PyErr_Restore(type_, value_, traceback_);
    type_ = value_ = traceback_ = nullptr;
    throw pybind11::error_already_set();
  }

 private:
  std::thread::id thread_;
  std::chrono::steady_clock::time_point next_{};
  std::atomic<bool> raised_{false};
  PyObject* type_ = nullptr;
  PyObject* value_ = nullptr;
  PyObject* traceback_ = nullptr;
};

}  // namespace tokdyn::python
