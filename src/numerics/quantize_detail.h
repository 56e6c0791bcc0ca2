#pragma once
// Internals of the quantiser shared by formats.cpp and format_experiments.cpp.
#include "mixprec/numerics/formats.h"

namespace mixprec::numerics::detail {

/// quantize(x, f); sets *was_tie (if not null) when x lay exactly halfway between two values.
double quantize_with_tie(double x, const FormatInfo& f, bool* was_tie);

/// The exact sum s + p rounded once to the format, ties to even (no double rounding through the
/// double sum): what an accumulator of that format holds after adding p to s.
double quantize_sum(double s, double p, const FormatInfo& f);

}  // namespace mixprec::numerics::detail
