// The simulated device's kernel table: every entry is the reference kernel, wrapped so that each
// device address it receives (plain pointers and the pointers inside StridedInput, StridedOutput,
// AttentionDesc and OptimArrays) is translated to the host block behind it. An argument that is
// not devsim memory is a host side-array where the contract wants device memory: the wrapper
// refuses it (InternalError naming the kernel and the argument), so a kernel contract that still
// takes host values fails here, on a machine without a GPU, instead of on the first GPU.
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/devsim_memory.h"
#include "kernels/backend.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

/// Translates device addresses for one call of the kernel `Name`; `arg` counts the arguments.
template <EntryName Name>
struct Translator {
  int arg = 0;

  template <class T>
  T* device(T* p, const char* field) {
    if (p == nullptr) return p;
    MIXPREC_CHECK(mixprec::detail::is_devsim_address(p), InternalError, Name.text,
                  "devsim: argument " << arg << (field[0] != '\0' ? "." : "") << field
                                      << " is a host address (" << static_cast<const void*>(p)
                                      << "), not device memory: a kernel contract must take "
                                         "tensors' device pointers, never host side-arrays "
                                         "(a mixprec bug, please report it)");
    return mixprec::detail::devsim_untag(p);
  }

  template <class T>
  T* operator()(T* p) {
    ++arg;
    return device(p, "");
  }
  StridedInput operator()(const StridedInput& s) {
    ++arg;
    return StridedInput{device(s.data, "data"), s.dtype, s.strides};
  }
  StridedOutput operator()(const StridedOutput& s) {
    ++arg;
    return StridedOutput{device(s.data, "data"), s.dtype, s.strides};
  }
  AttentionDesc operator()(const AttentionDesc& d) {
    ++arg;
    AttentionDesc t = d;
    t.mask = device(d.mask, "mask");
    t.mask_offsets = device(d.mask_offsets, "mask_offsets");
    return t;
  }
  OptimArrays operator()(const OptimArrays& a) {
    ++arg;
    OptimArrays t = a;
    t.param = device(a.param, "param");
    t.master = device(a.master, "master");
    t.grad = device(a.grad, "grad");
    t.state0 = device(a.state0, "state0");
    t.state1 = device(a.state1, "state1");
    t.random = device(a.random, "random");
    t.copy = device(a.copy, "copy");
    return t;
  }
  /// Scalars, enums, shapes (host metadata) and descriptors without addresses pass unchanged.
  template <class T>
    requires(!std::is_pointer_v<std::remove_cvref_t<T>>)
  T&& operator()(T&& v) {
    ++arg;
    return std::forward<T>(v);
  }
};

template <auto Fn, EntryName Name>
struct OnDevice;

template <class R, class... A, R (*Fn)(A...), EntryName Name>
struct OnDevice<Fn, Name> {
  static R run(A... a) {
    Translator<Name> t;
    // Braced initialisation evaluates the translations left to right, so `arg` counts in order.
    return std::apply(Fn, std::tuple<A...>{t(static_cast<A>(a))...});
  }
};

#define MIXPREC_DEVSIM(entry) .entry = &OnDevice<&ref::entry, #entry>::run

}  // namespace

const Backend& devsim_backend() {
  static const Backend b{
      .name = "devsim",
#define MIXPREC_DEVSIM_ENTRY(entry) MIXPREC_DEVSIM(entry),
      MIXPREC_KERNEL_ENTRIES(MIXPREC_DEVSIM_ENTRY)
#undef MIXPREC_DEVSIM_ENTRY
  };
  return b;
}

}  // namespace mixprec::kernels
