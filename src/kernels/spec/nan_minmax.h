#pragma once
// NaN-propagating max/min shared by every backend (the elementwise maximum/minimum and the
// max/min/amax reductions of ref, cpu and cuda): a NaN a wins, then a NaN b, else the larger
// (smaller); on a tie (-0 vs +0) b. The vector code makes exactly the same choices.
#include "kernels/spec/host_device.h"

namespace mixprec::kernels {

MIXPREC_HD inline float nan_max(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}

MIXPREC_HD inline float nan_min(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}

/// Whether nan_max(a, b) (nan_min(a, b)) returns b rather than a: for a reduction that must know
/// which element it kept (one that combines partial results gathered out of index order).
MIXPREC_HD inline bool nan_max_keeps_b(float a, float b) { return a == a && (b != b || !(a > b)); }
MIXPREC_HD inline bool nan_min_keeps_b(float a, float b) { return a == a && (b != b || !(a < b)); }

}  // namespace mixprec::kernels
