// The simulated device's kernel table: every entry is the reference kernel, wrapped so that each
// device address it receives (plain pointers and the pointers inside StridedInput, StridedOutput,
// AttentionDesc and OptimArrays) is translated to the host block behind it. An argument that is
// not devsim memory is a host side-array where the contract wants device memory: the wrapper
// refuses it (InternalError naming the kernel and the argument), so a kernel contract that still
// takes host values fails here, on a machine without a GPU, instead of on the first GPU.
// While the calling thread captures a graph (core/device_graph.h), each call is recorded with
// copies of its arguments instead of run, and runs at replay: a CUDA graph's rules, checked here.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/device_graph.h"
#include "core/devsim_memory.h"
#include "kernels/backend.h"
#include "kernels/device_pointers.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

/// Maps each device address of one call of the kernel `Name` to the host block behind it.
template <EntryName Name>
struct ToHostBlock {
  template <class T>
  T* operator()(T* p, const PointerSite& site) const {
    MIXPREC_CHECK(mixprec::detail::is_devsim_address(p), InternalError, Name.text,
                  "devsim: argument " << site.arg << (site.field[0] != '\0' ? "." : "")
                                      << site.field << " is a host address ("
                                      << static_cast<const void*>(p)
                                      << "), not device memory: a kernel contract must take "
                                         "tensors' device pointers, never host side-arrays "
                                         "(a mixprec bug, please report it)");
    return mixprec::detail::devsim_untag(p);
  }
};

/// An argument kept by a graph capture's recording (core/device_graph.h) until replay: a copy
/// of the value, including the host arrays a span points at (shapes, strides), which the
/// caller may free once the call returns, as a CUDA launch copies its parameters.
template <class A>
struct Kept {
  using T = std::remove_cvref_t<A>;
  static_assert(!(std::is_lvalue_reference_v<A> && !std::is_const_v<std::remove_reference_t<A>>),
                "a kernel that writes through a host reference cannot be recorded");
  static_assert(std::is_trivially_copyable_v<T>, "add a Kept specialisation for this argument");
  T value;
  explicit Kept(const T& v) : value(v) {}
  const T& view() const { return value; }
};
template <>
struct Kept<std::span<const std::int64_t>> {
  std::vector<std::int64_t> values;
  explicit Kept(std::span<const std::int64_t> s) : values(s.begin(), s.end()) {}
  std::span<const std::int64_t> view() const { return values; }
};
template <class Strided>
struct KeptStrided {
  Strided operand;  // its strides re-pointed at `strides` by view()
  std::vector<std::int64_t> strides;
  explicit KeptStrided(const Strided& s) : operand(s), strides(s.strides.begin(), s.strides.end()) {}
  Strided view() const {
    Strided t = operand;
    t.strides = strides;
    return t;
  }
};
template <>
struct Kept<const StridedInput&> : KeptStrided<StridedInput> {
  using KeptStrided::KeptStrided;
};
template <>
struct Kept<const StridedOutput&> : KeptStrided<StridedOutput> {
  using KeptStrided::KeptStrided;
};

template <auto Fn, EntryName Name>
struct OnDevice;

template <class R, class... A, R (*Fn)(A...), EntryName Name>
struct OnDevice<Fn, Name> {
  static R run(A... a) {
    if (std::vector<mixprec::detail::RecordedCall>* recording = mixprec::detail::devsim_recording()) {
      if constexpr (std::is_void_v<R>) {
        // Captured: nothing runs now; the replay runs the kernel with these arguments.
        recording->push_back([kept = std::make_shared<std::tuple<Kept<A>...>>(Kept<A>(a)...)] {
          std::apply([](const Kept<A>&... k) {
            ToHostBlock<Name> map;
            call_mapped(map, Fn, static_cast<A>(k.view())...);
          }, *kept);
        });
        return;
      } else {
        const std::string why = std::string(Name.text) +
                                " returns its result to the host: a graph cannot wait for it";
        mixprec::detail::note_capture_refusal(why);
        mixprec::detail::throw_error<StateError>("graph capture", why);
      }
    }
    if constexpr (!std::is_void_v<R>) {
      // Rehearsing a capture (core/device_graph.h): a result the host waits for would break it.
      if (mixprec::detail::capture_watched()) mixprec::detail::note_capture_refusal(std::string(Name.text) +
                                            " returns its result to the host: a graph cannot wait for it");
    }
    ToHostBlock<Name> map;
    return call_mapped(map, Fn, static_cast<A>(a)...);
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
