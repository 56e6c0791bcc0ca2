// Experiments on the formats: representation error per decade, and low-precision accumulation.
#include <algorithm>
#include <cmath>
#include <limits>

#include "mixprec/core/error.h"
#include "mixprec/core/random.h"
#include "mixprec/numerics/formats.h"
#include "numerics/quantize_detail.h"

namespace mixprec::numerics {
namespace {

// A uniform double in [0, 1) from the top 53 of 64 random bits.
double unit_double(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t bits = (static_cast<std::uint64_t>(hi) << 32) | lo;
  return std::ldexp(static_cast<double>(bits >> 11), -53);
}

}  // namespace

std::vector<DecadeError> representation_error_sweep(const FormatInfo& format, int lo_exp,
                                                    int hi_exp, int samples_per_decade) {
  MIXPREC_CHECK(lo_exp < hi_exp && lo_exp >= -300 && hi_exp <= 300, ValueError,
                "representation_error_sweep",
                "the decade range must be LO:HI with LO < HI, both within -300..300; got "
                    << lo_exp << ":" << hi_exp);
  MIXPREC_CHECK(samples_per_decade >= 1, ValueError, "representation_error_sweep",
                "samples_per_decade must be >= 1, got " << samples_per_decade);
  std::vector<DecadeError> out;
  out.reserve(static_cast<std::size_t>(hi_exp - lo_exp));
  for (int e = lo_exp; e < hi_exp; ++e) {
    DecadeError d;
    d.exponent = e;
    d.samples = samples_per_decade;
    int finite = 0, overflow = 0, subnormal = 0, zero = 0;
    double sum = 0;
    for (int i = 0; i < samples_per_decade; ++i) {
      const double x = std::pow(10.0, e + (i + 0.5) / samples_per_decade);
      const double q = quantize(x, format);
      if (!std::isfinite(q)) {
        ++overflow;
        continue;
      }
      if (q == 0) {
        ++zero;
      } else if (q < format.min_normal) {
        ++subnormal;
      }
      const double rel = std::fabs(q - x) / x;
      d.max_rel_error = std::max(d.max_rel_error, rel);
      sum += rel;
      ++finite;
    }
    const double n = samples_per_decade;
    d.overflow_fraction = overflow / n;
    d.subnormal_fraction = subnormal / n;
    d.zero_fraction = zero / n;
    if (finite == 0) {
      d.max_rel_error = d.mean_rel_error = std::numeric_limits<double>::infinity();
    } else {
      d.mean_rel_error = sum / finite;
    }
    out.push_back(d);
  }
  return out;
}

AccumulationResult accumulation_experiment(int n, const FormatInfo& input,
                                           const FormatInfo& accumulator, std::uint64_t seed) {
  MIXPREC_CHECK(n >= 1, ValueError, "accumulation_experiment",
                "n (the number of products) must be >= 1, got " << n);
  AccumulationResult r;
  r.n = n;
  r.input = input.format;
  r.accumulator = accumulator.format;
  double s = 0;
  // The reference: Neumaier's compensated sum of the products, which are exact in double (two
  // inputs of at most 24 significant bits); its error is far below any format studied here.
  double ref = 0, comp = 0;
  for (int i = 0; i < n; ++i) {
    const Philox::Counter block = Philox::block(seed, static_cast<std::uint64_t>(i));
    const double a = quantize(unit_double(block[0], block[1]), input);
    const double b = quantize(unit_double(block[2], block[3]), input);
    const double p = a * b;
    s = detail::quantize_sum(s, p, accumulator);
    const double t = ref + p;
    comp += std::fabs(ref) >= std::fabs(p) ? (ref - t) + p : (p - t) + ref;
    ref = t;
  }
  r.exact = ref + comp;
  r.computed = s;
  if (r.exact == 0) {
    r.rel_error = s == 0 ? 0 : std::numeric_limits<double>::infinity();
  } else {
    r.rel_error = std::fabs(s - r.exact) / std::fabs(r.exact);
    if (std::isnan(r.rel_error)) r.rel_error = std::numeric_limits<double>::infinity();
  }
  const double nu = n * unit_roundoff(accumulator);
  r.gamma_defined = nu < 1;
  r.gamma_n = r.gamma_defined ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
  return r;
}

std::vector<int> geometric_sizes(int lo, int hi, int per_decade) {
  MIXPREC_CHECK(lo >= 1 && lo <= hi && per_decade >= 1, ValueError, "geometric_sizes",
                "need 1 <= lo <= hi and per_decade >= 1; got lo=" << lo << " hi=" << hi
                                                                  << " per_decade=" << per_decade);
  std::vector<int> out;
  for (int k = 0;; ++k) {
    const double v = std::round(lo * std::pow(10.0, static_cast<double>(k) / per_decade));
    if (v >= hi) break;
    const int size = static_cast<int>(v);
    if (out.empty() || out.back() != size) out.push_back(size);
  }
  if (out.empty() || out.back() != hi) out.push_back(hi);
  return out;
}

}  // namespace mixprec::numerics
