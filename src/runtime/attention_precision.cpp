#include "mixprec/runtime/attention_precision.h"

#include <atomic>
#include <cstdlib>

#include "mixprec/core/error.h"

namespace mixprec::runtime {
namespace {

std::atomic<int>& global_precision() {
  static std::atomic<int> p{[] {
    const char* v = std::getenv("MIXPREC_ATTENTION_PRECISION");
    return static_cast<int>(v != nullptr && v[0] != '\0' ? parse_attention_precision(v)
                                                           : AttentionPrecision::default_);
  }()};
  return p;
}

thread_local int tls_override = -1;  // -1: no guard active on this thread

}  // namespace

const char* name(AttentionPrecision precision) {
  switch (precision) {
    case AttentionPrecision::highest: return "highest";
    case AttentionPrecision::default_: break;
  }
  return "default";
}

AttentionPrecision parse_attention_precision(std::string_view text) {
  if (text == "default") return AttentionPrecision::default_;
  if (text == "highest") return AttentionPrecision::highest;
  MIXPREC_CHECK(false, ValueError, "attention_precision",
                "unknown attention precision '" << text << "'; use default or highest");
  return AttentionPrecision::default_;
}

void set_attention_precision(AttentionPrecision precision) {
  global_precision().store(static_cast<int>(precision), std::memory_order_relaxed);
}

AttentionPrecision attention_precision() {
  const int v = tls_override >= 0 ? tls_override : global_precision().load(std::memory_order_relaxed);
  return static_cast<AttentionPrecision>(v);
}

AttentionPrecisionGuard::AttentionPrecisionGuard(AttentionPrecision precision)
    : previous_(tls_override) {
  tls_override = static_cast<int>(precision);
}

AttentionPrecisionGuard::~AttentionPrecisionGuard() { tls_override = previous_; }

}  // namespace mixprec::runtime
