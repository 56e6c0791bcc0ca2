#pragma once
/// Helpers shared by the conversion tests: the ISA caps to compare, and a cap guard.
#include <vector>

#include "mixprec/core/cpu_features.h"

namespace mixprec::test {

/// Restores the ISA cap a test found when it ends, even if it fails half-way.
class IsaCapGuard {
 public:
  IsaCapGuard() : saved_(max_isa()) {}
  ~IsaCapGuard() { set_max_isa(saved_); }
  IsaCapGuard(const IsaCapGuard&) = delete;
  IsaCapGuard& operator=(const IsaCapGuard&) = delete;

 private:
  Isa saved_;
};

/// The caps that select distinct conversion kernels on this CPU (under any MIXPREC_ISA cap):
/// scalar, then avx512 and avx512_bf16 when available. There is no AVX2 conversion kernel,
/// so Isa::avx2 would run the scalar loops again.
inline std::vector<Isa> conversion_caps() {
  std::vector<Isa> caps{Isa::scalar};
  for (Isa level : {Isa::avx512, Isa::avx512_bf16}) {
    if (level <= max_isa()) caps.push_back(level);
  }
  return caps;
}

}  // namespace mixprec::test
