// The "ref" backend: the scalar reference loops, the specification of every kernel.
#include "kernels/backend.h"

namespace mixprec::kernels {

const Backend& ref_backend() {
  static const Backend b{
      .name = "ref",
#define MIXPREC_REF_ENTRY(entry) .entry = &ref::entry,
      MIXPREC_KERNEL_ENTRIES(MIXPREC_REF_ENTRY)
#undef MIXPREC_REF_ENTRY
  };
  return b;
}

}  // namespace mixprec::kernels
