// The simulated device's kernel table: every entry is the reference kernel, wrapped so that each
// device address it receives (plain pointers and the pointers inside StridedInput, StridedOutput,
// AttentionDesc and OptimArrays) is translated to the host block behind it. An argument that is
// not devsim memory is a host side-array where the contract wants device memory: the wrapper
// refuses it (InternalError naming the kernel and the argument), so a kernel contract that still
// takes host values fails here, on a machine without a GPU, instead of on the first GPU.
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

template <auto Fn, EntryName Name>
struct OnDevice;

template <class R, class... A, R (*Fn)(A...), EntryName Name>
struct OnDevice<Fn, Name> {
  static R run(A... a) {
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
