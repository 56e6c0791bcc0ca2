#pragma once
/// How a kernel descriptor says which dtypes it carries: a member
///   template <class F> void for_each_dtype(F&& f) const;
/// that calls f(DType) for each of them (StridedInput, MatmulDesc, OptimArrays, UnscaleBatch,
/// ...). The entry points (backend.cpp, CallDTypes) collect a call's DType arguments and its
/// descriptors' dtypes this way, so a backend's supports() and the fallback's log line see every
/// dtype of every call. Batch descriptors name each distinct dtype of their runs once.
#include "mixprec/core/dtype.h"

namespace mixprec::kernels {

/// Forwards each dtype to f the first time it is seen: a batch's dtypes without repeats.
template <class F>
struct DistinctDTypes {
  F& f;
  unsigned seen = 0;
  void operator()(DType t) {
    const unsigned bit = 1u << static_cast<unsigned>(t);
    if ((seen & bit) != 0) return;
    seen |= bit;
    f(t);
  }
};

}  // namespace mixprec::kernels
