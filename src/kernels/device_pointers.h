#pragma once
/// Every device address one kernel call receives, in argument order: plain pointer arguments and
/// the pointers inside the descriptors that carry them (StridedInput, StridedOutput,
/// AttentionDesc, OptimArrays, OptimBatch, ReduceBatch, UnscaleBatch). A visitor maps each to another
/// address; the call then runs with the mapped arguments. Two users: the devsim backend maps its
/// tagged addresses to the host blocks behind them, and the device conformance harness maps host
/// buffers to device copies (uploaded before, the written ones downloaded after). A new descriptor that carries an address
/// is added here once, for both.
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/backend.h"

namespace mixprec::kernels {

/// What a visitor learns about one address: the argument's position (1-based), the field inside a
/// descriptor ("" for a plain pointer) and whether the kernel may write through it.
struct PointerSite {
  int arg = 0;
  const char* field = "";
  bool written = false;
};

/// Applies Map (`T* map(T* p, const PointerSite&)`) to every address of one call's arguments.
template <class Map>
class DevicePointers {
 public:
  explicit DevicePointers(Map& map) : map_(map) {}

  template <class T>
  T* operator()(T* p) {
    ++arg_;
    return visit(p, "");
  }
  StridedInput operator()(const StridedInput& s) {
    ++arg_;
    return StridedInput{visit(s.data, "data"), s.dtype, s.strides};
  }
  StridedOutput operator()(const StridedOutput& s) {
    ++arg_;
    return StridedOutput{visit(s.data, "data"), s.dtype, s.strides};
  }
  AttentionDesc operator()(const AttentionDesc& d) {
    ++arg_;
    AttentionDesc t = d;
    t.mask = visit(d.mask, "mask");
    t.mask_offsets = visit(d.mask_offsets, "mask_offsets");
    return t;
  }
  OptimArrays operator()(const OptimArrays& a) {
    ++arg_;
    return mapped(a);
  }
  template <class Scalars>
  OptimBatch<Scalars> operator()(const OptimBatch<Scalars>& b) {
    ++arg_;
    OptimBatch<Scalars> t = b;
    for (int r = 0; r < b.size; ++r) t.runs[r].arrays = mapped(b.runs[r].arrays);
    return t;
  }
  ReduceBatch operator()(const ReduceBatch& b) {
    ++arg_;
    ReduceBatch t = b;
    for (int r = 0; r < b.size; ++r) t.runs[r].data = visit(b.runs[r].data, "runs.data");
    t.out = visit(b.out, "out");
    return t;
  }
  UnscaleBatch operator()(const UnscaleBatch& b) {
    ++arg_;
    UnscaleBatch t = b;
    for (int r = 0; r < b.size; ++r) t.runs[r].data = visit(b.runs[r].data, "runs.data");
    t.found_inf = visit(b.found_inf, "found_inf");
    t.amax = visit(b.amax, "amax");
    return t;
  }
  /// Scalars, enums, shapes (host metadata) and descriptors without addresses pass unchanged.
  template <class T>
    requires(!std::is_pointer_v<std::remove_cvref_t<T>>)
  T&& operator()(T&& v) {
    ++arg_;
    return std::forward<T>(v);
  }

 private:
  OptimArrays mapped(const OptimArrays& a) {
    OptimArrays t = a;
    t.param = visit(a.param, "param");
    t.master = visit(a.master, "master");
    t.grad = visit(a.grad, "grad");
    t.state0 = visit(a.state0, "state0");
    t.state1 = visit(a.state1, "state1");
    t.random = visit(a.random, "random");
    t.copy = visit(a.copy, "copy");
    t.grad_multiplier = visit(a.grad_multiplier, "grad_multiplier");
    return t;
  }

  template <class T>
  T* visit(T* p, const char* field) {
    if (p == nullptr) return p;
    return map_(p, PointerSite{arg_, field, !std::is_const_v<T>});
  }

  Map& map_;
  int arg_ = 0;
};

/// Calls fn with every address of args mapped by map. Braced initialisation evaluates the
/// mappings left to right, so argument positions count in order.
template <class Map, class R, class... A, class... Given>
R call_mapped(Map& map, R (*fn)(A...), Given&&... args) {
  DevicePointers<Map> visit(map);
  return std::apply(fn, std::tuple<A...>{visit(static_cast<A>(std::forward<Given>(args)))...});
}

}  // namespace mixprec::kernels
