#pragma once
/// What casting a stream of values to a narrower format would do to them, counted exactly: the
/// largest magnitude, and how many values would overflow, flush to zero or become subnormal in
/// FP16, BF16, FP8 E4M3 and FP8 E5M2; a histogram of binades, so that the flush-to-zero count at
/// any power-of-two loss scale can be computed afterwards; and the weight updates a 16-bit weight
/// could not take. The numeric core of `mixprec inspect` (train/inspect.h).
///
/// Format limits come from numerics::format_info (numerics/formats.h); every threshold here is
/// derived from that table and agrees with numerics::quantize, round-to-nearest-even included.
#include <array>
#include <cstdint>
#include <span>

#include "mixprec/core/dtype.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/numerics/formats.h"

namespace mixprec::numerics {

/// The formats inspected, in the order of every per-format array below.
inline constexpr std::array<numerics::Format, 4> kInspectFormats{
    numerics::Format::fp16, numerics::Format::bf16, numerics::Format::fp8_e4m3,
    numerics::Format::fp8_e5m2};
inline constexpr std::size_t kInspectFormatCount = kInspectFormats.size();
/// Index of a format in kInspectFormats (fp16 0, bf16 1, fp8_e4m3 2, fp8_e5m2 3); ValueError for
/// a format that is not inspected (fp32, tf32).
std::size_t inspect_format_index(numerics::Format format);

/// What round-to-nearest-even into one format does to a positive finite magnitude.
enum class CastOutcome : std::uint8_t {
  normal,     ///< rounds to a normal value (including the largest finite one)
  subnormal,  ///< rounds to a nonzero subnormal: precision is lost
  zero,       ///< rounds to zero: the value is gone (underflow)
  overflow,   ///< rounds beyond the largest finite value: Inf, or NaN in FP8 E4M3
};

/// The magnitudes at which a format's cast outcome changes, derived from its FormatInfo so that
/// classify() equals what numerics::quantize does for every positive finite double.
struct CastThresholds {
  double zero_max = 0;        ///< <= this rounds to zero: min_subnormal / 2 (the tie goes to 0)
  double subnormal_end = 0;   ///< below this (and above zero_max) a nonzero subnormal:
                              ///< min_normal - min_subnormal / 2 (the tie rounds up to normal)
  double overflow_start = 0;  ///< above this overflows: max + ulp(max) / 2
  bool overflow_at_tie = false;  ///< whether overflow_start itself overflows (max's mantissa odd)
  /// The outcome of casting magnitude a > 0 (finite).
  CastOutcome classify(double a) const noexcept {
    if (a <= zero_max) return CastOutcome::zero;
    if (a < subnormal_end) return CastOutcome::subnormal;
    if (a > overflow_start || (a == overflow_start && overflow_at_tie)) return CastOutcome::overflow;
    return CastOutcome::normal;
  }
};
/// The thresholds of a format (computed once per format and cached).
const CastThresholds& cast_thresholds(numerics::Format format);

/// How many values a cast to one format would damage.
struct CastCounts {
  std::int64_t overflow = 0;   ///< |x| rounds beyond max (Inf; NaN for E4M3), Inf inputs included
  std::int64_t underflow = 0;  ///< x != 0 rounds to zero
  std::int64_t subnormal = 0;  ///< x rounds to a nonzero subnormal
};

/// Binades tracked by the histogram: floor(log2 |x|) in [kMinBinade, kMaxBinade]; magnitudes
/// outside land in the end bins (they cannot occur for f32 data scaled by at most 2^±64).
inline constexpr int kMinBinade = -256;
inline constexpr int kMaxBinade = 255;
inline constexpr std::size_t kBinadeCount = kMaxBinade - kMinBinade + 1;

/// Statistics of a stream of values (one layer's activations over every step, say), each value
/// taken as |x| * multiplier (a power of two, e.g. 1/S to undo a loss scale S, is exact).
/// Fractions are over every value seen (count), zeros and NaN included.
struct TensorStats {
  std::int64_t count = 0;      ///< values seen
  std::int64_t zeros = 0;      ///< exact zeros
  std::int64_t nan = 0;        ///< NaN (in no other count)
  std::int64_t inf = 0;        ///< +-Inf (also in the overflow count of the formats it overflows)
  double amax = 0;             ///< largest finite |x| (0 if none)
  double amin_nonzero = 0;     ///< smallest nonzero finite |x| (0 if none)
  std::array<CastCounts, kInspectFormatCount> cast{};  ///< per kInspectFormats entry
  /// Finite nonzero values per binade floor(log2 |x|), index binade - kMinBinade.
  std::array<std::int64_t, kBinadeCount> binades{};
  /// Of binades[i], the values that are exactly a power of two, 2^(i + kMinBinade).
  std::array<std::int64_t, kBinadeCount> powers_of_two{};

  /// Adds one value. source_max: the largest finite value of the dtype the value was held in;
  /// an Inf counts as overflow only for formats whose max is <= source_max (an Inf in an f16
  /// tensor says the value exceeded 65504, not that it would overflow bf16).
  void add(double x, double multiplier = 1.0, double source_max = traits(DType::f32).max) noexcept;
  /// Adds every element of t (any dtype, any strides), each times multiplier.
  void add(const Tensor& t, double multiplier = 1.0);
  /// Adds every value of another stream (same multiplier convention).
  void merge(const TensorStats& other);

  /// True when no value was added.
  bool empty() const noexcept { return count == 0; }
  /// n / count (0 for an empty stream).
  double fraction(std::int64_t n) const noexcept {
    return count > 0 ? static_cast<double>(n) / static_cast<double>(count) : 0.0;
  }
  /// Fractions of all values that a cast to f would overflow / flush to zero / make subnormal
  /// (ValueError for a format not in kInspectFormats).
  double overflow_fraction(numerics::Format f) const { return fraction(cast[inspect_format_index(f)].overflow); }
  double underflow_fraction(numerics::Format f) const { return fraction(cast[inspect_format_index(f)].underflow); }
  double subnormal_fraction(numerics::Format f) const { return fraction(cast[inspect_format_index(f)].subnormal); }
  /// Fraction of values that would flush to zero in format f if every value were first
  /// multiplied by 2^scale_log2 (a loss scale): exact, from the binade histograms, because the
  /// flush-to-zero threshold min_subnormal / 2 is a power of two.
  double underflow_fraction_at_scale(numerics::Format f, int scale_log2) const;
};

/// Half the spacing of format f's values at |w|: 2^(max(floor(log2 |w|), 1 - bias) -
/// mantissa_bits - 1). An update smaller than this leaves a weight stored in f unchanged.
/// w must be finite and nonzero (ValueError otherwise).
double half_ulp(double w, const numerics::FormatInfo& f);

/// Weight updates that a weight held in 16 bits would lose entirely.
struct LostUpdates {
  std::int64_t considered = 0;  ///< elements with w != 0 and dw != 0 (both finite)
  std::int64_t lost_bf16 = 0;   ///< of those, |dw| < half_ulp(w, bf16)
  std::int64_t lost_fp16 = 0;   ///< of those, |dw| < half_ulp(w, fp16)
  /// Counts the pairs (w[i], dw[i]): w the fp32 master before the step, dw its change by the
  /// step (after - before). ValueError if the spans differ in length.
  void add(std::span<const float> w, std::span<const double> dw);
  /// Adds another tally's counts.
  void merge(const LostUpdates& other);
  /// lost_bf16 / considered and lost_fp16 / considered (0 when nothing was considered).
  double bf16_fraction() const noexcept { return frac(lost_bf16); }
  double fp16_fraction() const noexcept { return frac(lost_fp16); }

 private:
  double frac(std::int64_t n) const noexcept {
    return considered > 0 ? static_cast<double>(n) / static_cast<double>(considered) : 0.0;
  }
};

}  // namespace mixprec::numerics
