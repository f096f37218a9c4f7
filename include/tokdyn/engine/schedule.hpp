#pragma once
// WeightSchedule: which parameters act at layer k (k = 1, 2, ...) or, for flows, at time t.
// Layer-indexed schedules act on time by holding layer k on [(k-1)*period, k*period), and report
// those switching times so that integrators never step across a jump.
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tokdyn/core/rng.hpp"

namespace tokdyn {

template <class P>
class WeightSchedule {
 public:
  virtual ~WeightSchedule() = default;
  /// Parameters of layer k >= 1.
  virtual std::shared_ptr<const P> at_layer(long k) const = 0;
  /// Parameters at time t >= 0 (flows). Default: layer floor(t/period) + 1.
  virtual std::shared_ptr<const P> at_time(double t) const {
    return at_layer(static_cast<long>(std::floor(t / period_)) + 1);
  }
  /// Times in (t0, t1) where the parameters jump (empty for constant or smooth schedules).
  virtual std::vector<double> switching_times(double t0, double t1) const {
    std::vector<double> out;
    for (long k = static_cast<long>(std::floor(t0 / period_)) + 1;; ++k) {
      const double s = k * period_;
      if (s >= t1) break;
      if (s > t0) out.push_back(s);
    }
    return out;
  }
  /// Flow time spanned by one layer (default 1: "t is the layer index", §VI).
  double period() const { return period_; }
  void set_period(double p) { period_ = p; }

 protected:
  double period_ = 1.0;
};

/// The same parameters at every layer and time.
template <class P>
class ConstantSchedule final : public WeightSchedule<P> {
 public:
  explicit ConstantSchedule(P p) : p_(std::make_shared<const P>(std::move(p))) {}
  std::shared_ptr<const P> at_layer(long) const override { return p_; }
  std::shared_ptr<const P> at_time(double) const override { return p_; }
  std::vector<double> switching_times(double, double) const override { return {}; }

 private:
  std::shared_ptr<const P> p_;
};

/// Cycle through a list: layer k uses entry (k-1) mod size (24 checkpoint layers cycled to 200).
template <class P>
class CycleSchedule final : public WeightSchedule<P> {
 public:
  explicit CycleSchedule(std::vector<P> list) {
    if (list.empty()) throw std::invalid_argument("CycleSchedule: empty list");
    for (auto& p : list) list_.push_back(std::make_shared<const P>(std::move(p)));
  }
  std::shared_ptr<const P> at_layer(long k) const override {
    const long L = static_cast<long>(list_.size());
    return list_[static_cast<std::size_t>(((k - 1) % L + L) % L)];
  }

 private:
  std::vector<std::shared_ptr<const P>> list_;
};

/// Entries of a shared list chosen by an index list cycled over layers: layer k uses
/// list[index[(k-1) mod index.size()]]. Index 0..n-1 cycles the list (24 checkpoint blocks cycled to
/// depth 200); {l} repeats entry l; any other list cycles those entries. The entries are shared,
/// not copied (model weights).
template <class P>
class ListSchedule final : public WeightSchedule<P> {
 public:
  ListSchedule(std::vector<std::shared_ptr<const P>> list, std::vector<long> index) : list_(std::move(list)), index_(std::move(index)) {
    if (list_.empty()) throw std::invalid_argument("ListSchedule: empty list");
    if (index_.empty()) throw std::invalid_argument("ListSchedule: empty index list");
    for (long i : index_)
      if (i < 0 || i >= static_cast<long>(list_.size())) throw std::invalid_argument("ListSchedule: index out of range");
  }
  /// Every entry in order, cycled.
  explicit ListSchedule(std::vector<std::shared_ptr<const P>> list) : ListSchedule(list, iota(list.size())) {}
  std::shared_ptr<const P> at_layer(long k) const override {
    const long n = static_cast<long>(index_.size());
    return list_[static_cast<std::size_t>(index_[static_cast<std::size_t>(((k - 1) % n + n) % n)])];
  }

 private:
  static std::vector<long> iota(std::size_t n) {
    std::vector<long> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<long>(i);
    return v;
  }
  std::vector<std::shared_ptr<const P>> list_;
  std::vector<long> index_;
};

/// Parameters of layer k made on demand by a function of k (e.g. a fresh initialisation from the
/// random stream of layer k), so any layer can be produced in any order with the same bits. The
/// last few are cached: drivers running several lanes in lock step make each layer once.
template <class P>
class OnDemandSchedule final : public WeightSchedule<P> {
 public:
  explicit OnDemandSchedule(std::function<P(long k)> make) : make_(std::move(make)) {}
  std::shared_ptr<const P> at_layer(long k) const override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, val] : cache_)
      if (key == k) return val;
    auto p = std::make_shared<const P>(make_(k));
    cache_.emplace_back(k, p);
    if (cache_.size() > 2) cache_.erase(cache_.begin());
    return p;
  }

 private:
  std::function<P(long)> make_;
  mutable std::mutex mu_;
  mutable std::vector<std::pair<long, std::shared_ptr<const P>>> cache_;
};

/// Parameters redrawn i.i.d. every `every` layers (every = 1: at every layer). Draw b (layers
/// (b*every, (b+1)*every]) comes from the stream Rng(seed, {b}), so any layer can be produced
/// on demand, in any order, on any thread, with the same bits. The last few draws are cached.
template <class P>
class IidSchedule final : public WeightSchedule<P> {
 public:
  using Generator = std::function<P(Rng&)>;
  IidSchedule(Generator gen, std::uint64_t seed, long every = 1)
      : gen_(std::move(gen)), seed_(seed), every_(every) {
    if (every < 1) throw std::invalid_argument("IidSchedule: every must be >= 1");
  }
  std::shared_ptr<const P> at_layer(long k) const override {
    const long b = (k - 1) / every_;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, val] : cache_)
      if (key == b) return val;
    Rng rng(seed_, {static_cast<std::uint64_t>(b)});
    auto p = std::make_shared<const P>(gen_(rng));
    cache_.emplace_back(b, p);
    if (cache_.size() > 4) cache_.erase(cache_.begin());
    return p;
  }
  std::vector<double> switching_times(double t0, double t1) const override {
    std::vector<double> out;
    const double per = this->period_ * every_;
    for (long k = static_cast<long>(std::floor(t0 / per)) + 1;; ++k) {
      const double s = k * per;
      if (s >= t1) break;
      if (s > t0) out.push_back(s);
    }
    return out;
  }

 private:
  Generator gen_;
  std::uint64_t seed_;
  long every_;
  mutable std::mutex mu_;
  mutable std::vector<std::pair<long, std::shared_ptr<const P>>> cache_;
};

/// Smooth (or any) function of time, t -> parameters; layer k uses time (k-1)*period.
template <class P>
class FunctionSchedule final : public WeightSchedule<P> {
 public:
  explicit FunctionSchedule(std::function<P(double)> f) : f_(std::move(f)) {}
  std::shared_ptr<const P> at_layer(long k) const override {
    return std::make_shared<const P>(f_((k - 1) * this->period_));
  }
  std::shared_ptr<const P> at_time(double t) const override { return std::make_shared<const P>(f_(t)); }
  std::vector<double> switching_times(double, double) const override { return {}; }

 private:
  std::function<P(double)> f_;
};

}  // namespace tokdyn
