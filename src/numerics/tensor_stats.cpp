// Cast-outcome counting for `mixprec inspect`: thresholds derived from the format table (and
// checked against numerics::quantize in tests), one pass per tensor, exact counts.
#include "mixprec/numerics/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "mixprec/core/transfer.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/formats.h"

namespace mixprec::numerics {
namespace {

CastThresholds make_thresholds(const numerics::FormatInfo& f) {
  CastThresholds t;
  t.zero_max = f.min_subnormal / 2;
  t.subnormal_end = f.min_normal - f.min_subnormal / 2;
  // The spacing of the top binade: max lies in [2^e, 2^(e+1)), where values are 2^(e - m) apart.
  const double half_spacing = std::ldexp(1.0, std::ilogb(f.max) - f.mantissa_bits - 1);
  t.overflow_start = f.max + half_spacing;
  // Whether the tie rounds away from max is the format's own business (E4M3's max has an even
  // mantissa and keeps the tie; IEEE-like formats' max is odd and lose it): ask the quantiser.
  t.overflow_at_tie = !std::isfinite(numerics::quantize(t.overflow_start, f));
  return t;
}

int binade_index(double a) noexcept {
  const int b = std::ilogb(a);
  return std::clamp(b, kMinBinade, kMaxBinade) - kMinBinade;
}

bool is_power_of_two(double a) noexcept {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &a, sizeof bits);
  // a is a positive normal double here (float values times a modest power of two).
  return (bits & ((std::uint64_t{1} << 52) - 1)) == 0;
}

}  // namespace

std::size_t inspect_format_index(numerics::Format format) {
  for (std::size_t i = 0; i < kInspectFormatCount; ++i) {
    if (kInspectFormats[i] == format) return i;
  }
  MIXPREC_CHECK(false, ValueError, "inspect",
                "format '" << numerics::format_info(format).name
                           << "' is not inspected; use fp16, bf16, fp8_e4m3 or fp8_e5m2");
  return 0;
}

const CastThresholds& cast_thresholds(numerics::Format format) {
  static const std::array<CastThresholds, kInspectFormatCount> table = [] {
    std::array<CastThresholds, kInspectFormatCount> out{};
    for (std::size_t i = 0; i < kInspectFormatCount; ++i) {
      out[i] = make_thresholds(numerics::format_info(kInspectFormats[i]));
    }
    return out;
  }();
  return table[inspect_format_index(format)];
}

void TensorStats::add(double x, double multiplier, double source_max) noexcept {
  static const std::array<const CastThresholds*, kInspectFormatCount> thresholds = [] {
    std::array<const CastThresholds*, kInspectFormatCount> out{};
    for (std::size_t i = 0; i < kInspectFormatCount; ++i) out[i] = &cast_thresholds(kInspectFormats[i]);
    return out;
  }();
  ++count;
  if (std::isnan(x)) {
    ++nan;
    return;
  }
  if (std::isinf(x)) {
    ++inf;
    for (std::size_t i = 0; i < kInspectFormatCount; ++i) {
      if (numerics::format_info(kInspectFormats[i]).max <= source_max) ++cast[i].overflow;
    }
    return;
  }
  const double a = std::fabs(x) * multiplier;
  if (a == 0) {
    ++zeros;
    return;
  }
  if (a > amax) amax = a;
  if (amin_nonzero == 0 || a < amin_nonzero) amin_nonzero = a;
  const int bin = binade_index(a);
  ++binades[static_cast<std::size_t>(bin)];
  if (is_power_of_two(a)) ++powers_of_two[static_cast<std::size_t>(bin)];
  for (std::size_t i = 0; i < kInspectFormatCount; ++i) {
    switch (thresholds[i]->classify(a)) {
      case CastOutcome::zero: ++cast[i].underflow; break;
      case CastOutcome::subnormal: ++cast[i].subnormal; break;
      case CastOutcome::overflow: ++cast[i].overflow; break;
      case CastOutcome::normal: break;
    }
  }
}

void TensorStats::add(const Tensor& t, double multiplier) {
  if (!t.device().is_host()) {  // statistics are counted on the host: one counted download
    const TransferReason why("inspect statistics");
    add(t.to(Device{}), multiplier);
    return;
  }
  const double source_max = traits(t.dtype()).max;
  dispatch(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const auto* base = static_cast<const T*>(t.data_ptr());
    const Shape& shape = t.shape();
    const Shape& strides = t.strides();
    const std::int64_t n = t.numel();
    if (n == 0) return;
    if (t.is_contiguous()) {
      for (std::int64_t i = 0; i < n; ++i) add(static_cast<float>(base[i]), multiplier, source_max);
      return;
    }
    // Strided walk with an odometer over the dimensions (rare: layer outputs are contiguous).
    Shape index(shape.size(), 0);
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t offset = 0;
      for (std::size_t d = 0; d < shape.size(); ++d) offset += index[d] * strides[d];
      add(static_cast<float>(base[offset]), multiplier, source_max);
      for (std::size_t d = shape.size(); d-- > 0;) {
        if (++index[d] < shape[d]) break;
        index[d] = 0;
      }
    }
  });
}

void TensorStats::merge(const TensorStats& o) {
  count += o.count;
  zeros += o.zeros;
  nan += o.nan;
  inf += o.inf;
  amax = std::max(amax, o.amax);
  if (o.amin_nonzero > 0 && (amin_nonzero == 0 || o.amin_nonzero < amin_nonzero)) {
    amin_nonzero = o.amin_nonzero;
  }
  for (std::size_t i = 0; i < kInspectFormatCount; ++i) {
    cast[i].overflow += o.cast[i].overflow;
    cast[i].underflow += o.cast[i].underflow;
    cast[i].subnormal += o.cast[i].subnormal;
  }
  for (std::size_t i = 0; i < kBinadeCount; ++i) {
    binades[i] += o.binades[i];
    powers_of_two[i] += o.powers_of_two[i];
  }
}

double TensorStats::underflow_fraction_at_scale(numerics::Format f, int scale_log2) const {
  // a * 2^k flushes iff a * 2^k <= min_subnormal / 2 = 2^z, i.e. a < 2^(z - k) or a == 2^(z - k).
  const int z = std::ilogb(numerics::format_info(f).min_subnormal) - 1;
  const long long t = static_cast<long long>(z) - scale_log2;
  std::int64_t n = 0;
  for (std::size_t i = 0; i < kBinadeCount; ++i) {
    const long long b = static_cast<long long>(i) + kMinBinade;
    if (b < t) n += binades[i];
    if (b == t) n += powers_of_two[i];
  }
  return fraction(n);
}

double half_ulp(double w, const numerics::FormatInfo& f) {
  MIXPREC_CHECK(std::isfinite(w) && w != 0, ValueError, "half_ulp",
                "the weight must be finite and nonzero, got " << w);
  const int e = std::max(std::ilogb(w), 1 - f.bias);
  return std::ldexp(1.0, e - f.mantissa_bits - 1);
}

void LostUpdates::add(std::span<const float> w, std::span<const double> dw) {
  MIXPREC_CHECK(w.size() == dw.size(), ValueError, "LostUpdates::add",
                "weights and updates differ in length: " << w.size() << " vs " << dw.size());
  const numerics::FormatInfo& bf = numerics::format_info(numerics::Format::bf16);
  const numerics::FormatInfo& fp = numerics::format_info(numerics::Format::fp16);
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double wi = w[i], d = std::fabs(dw[i]);
    if (wi == 0 || d == 0 || !std::isfinite(wi) || !std::isfinite(d)) continue;
    ++considered;
    // half_ulp inlined for the hot loop: the two formats share the exponent of w.
    const int e = std::ilogb(wi);
    if (d < std::ldexp(1.0, std::max(e, 1 - bf.bias) - bf.mantissa_bits - 1)) ++lost_bf16;
    if (d < std::ldexp(1.0, std::max(e, 1 - fp.bias) - fp.mantissa_bits - 1)) ++lost_fp16;
  }
}

void LostUpdates::merge(const LostUpdates& o) {
  considered += o.considered;
  lost_bf16 += o.lost_bf16;
  lost_fp16 += o.lost_fp16;
}

}  // namespace mixprec::numerics
