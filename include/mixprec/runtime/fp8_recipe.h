#pragma once
/// An fp8 training recipe (docs/fp8.md, "Recipes"): how the per-tensor scales of the fp8
/// GEMMs are chosen (from this step's amax, or from the largest amax of a history of steps),
/// the margin, and the formats of the forward operands and of the gradients.
#include <cstdint>
#include <string>
#include <string_view>

#include "mixprec/core/dtype.h"

namespace mixprec::runtime {

/// Where a tensor's scale comes from.
enum class Fp8Scaling : std::uint8_t {
  current,  ///< "current": this tensor's own amax, measured before its cast (two passes)
  delayed,  ///< "delayed": the largest amax of the last N steps, updated after the cast (one pass)
};

/// Which fp8 formats the roles use.
enum class Fp8Formats : std::uint8_t {
  hybrid,  ///< "hybrid": E4M3 for inputs and weights, E5M2 for gradients (range over precision)
  e4m3,    ///< "e4m3": E4M3 everywhere
};

/// A recipe. The defaults are delayed scaling over 16 steps, margin 0, hybrid formats.
struct Fp8Recipe {
  Fp8Scaling scaling = Fp8Scaling::delayed;
  /// Steps of amax history (delayed scaling; current scaling uses 1). 16, not Transformer
  /// Engine's 1024: a window of 1024 steps keeps a scale chosen for the large gradients of the
  /// first steps for a thousand steps and flushes the later small ones; the runs this library
  /// trains are a few thousand steps long.
  std::int64_t amax_history = 16;
  /// The scale is divided by 2^margin: headroom for an amax that grows between updates.
  int margin = 0;
  Fp8Formats formats = Fp8Formats::hybrid;

  /// The history length actually used: amax_history for delayed scaling, 1 for current.
  std::int64_t history_length() const {
    return scaling == Fp8Scaling::current ? 1 : amax_history;
  }
  /// f8e4m3 (inputs and weights, both recipes' formats).
  DType forward_format() const { return DType::f8e4m3; }
  /// f8e5m2 (hybrid) or f8e4m3.
  DType grad_format() const {
    return formats == Fp8Formats::hybrid ? DType::f8e5m2 : DType::f8e4m3;
  }
  /// ValueError (one line naming the field) unless amax_history >= 1 and 0 <= margin <= 64.
  void validate() const;
  bool operator==(const Fp8Recipe&) const = default;
};

/// "current", "delayed".
const char* name(Fp8Scaling scaling);
/// "hybrid", "e4m3".
const char* name(Fp8Formats formats);
/// Parses "hybrid" or "e4m3"; ValueError naming the text and the choices otherwise.
Fp8Formats parse_fp8_formats(std::string_view text);
/// "delayed, history 16, margin 0, hybrid": for logs and --help.
std::string to_string(const Fp8Recipe& recipe);

}  // namespace mixprec::runtime
