#pragma once
// The arithmetic of synchronised batch norm that needs no second process, unit-tested on its
// own: combining per-rank moments (Chan, Golub and LeVeque's parallel formula) and moving
// doubles through the f32 all-gather.
#include <cmath>
#include <cstddef>
#include <vector>

#include "mixprec/runtime/communicator.h"

namespace mixprec::ops::detail {

/// Count, mean and sum of squared deviations from the mean (m2) of a set of values.
struct Moments {
  double count = 0.0;
  double mean = 0.0;
  double m2 = 0.0;
};

/// The moments of the union of two disjoint sets (Chan, Golub and LeVeque, 1979):
/// mean = a.mean + delta * b.count / n and m2 = a.m2 + b.m2 + delta^2 * a.count * b.count / n,
/// delta = b.mean - a.mean. Every term of m2 is >= 0, so nothing cancels however large the
/// means are against the spread (unlike sum x^2 - n mean^2). An empty side leaves the other.
inline Moments combine(const Moments& a, const Moments& b) {
  if (b.count == 0.0) return a;
  if (a.count == 0.0) return b;
  const double n = a.count + b.count;
  const double delta = b.mean - a.mean;
  return {n, a.mean + delta * (b.count / n), a.m2 + b.m2 + delta * delta * (a.count / n) * b.count};
}

/// A double as two floats, hi = f32(v) and lo = f32(v - hi), so that hi + lo (added in double)
/// is v to about 48 bits (a relative 2^-48 ~ 4e-15): f32 has 24, the rest rounds once. A value
/// beyond the f32 range gives hi = +-Inf and lo = 0 (so it joins as Inf, not NaN); NaN stays NaN.
struct SplitDouble {
  float hi, lo;
};
inline SplitDouble split_double(double v) {
  const float hi = static_cast<float>(v);
  if (!std::isfinite(hi)) return {hi, 0.0f};
  return {hi, static_cast<float>(v - static_cast<double>(hi))};
}
inline double join_double(float hi, float lo) {
  return static_cast<double>(hi) + static_cast<double>(lo);
}

/// Collective: every rank's `mine` (the same length on every rank), rank after rank:
/// out[r * mine.size() + i] is rank r's mine[i] to the precision of split_double, identical on
/// every rank. Each rank puts its split values in its slot of an f32 buffer of size() slots
/// (the slots are the allgather shards) and Communicator::allgather (f32 wire: the bits travel
/// unchanged) fills in the others; each rank receives (size() - 1) * 2 * mine.size() floats.
/// `scratch` is the caller's f32 workspace.
void allgather_doubles(const runtime::Communicator& comm, const std::vector<double>& mine,
                       std::vector<double>& out, std::vector<float>& scratch);

}  // namespace mixprec::ops::detail
