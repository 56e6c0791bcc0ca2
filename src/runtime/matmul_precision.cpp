#include "mixprec/runtime/matmul_precision.h"

#include <atomic>
#include <cstdlib>

#include "mixprec/core/error.h"

namespace mixprec::runtime {
namespace {

std::atomic<int>& global_precision() {
  static std::atomic<int> p{[] {
    const char* v = std::getenv("MIXPREC_MATMUL_PRECISION");
    return static_cast<int>(v != nullptr && v[0] != '\0' ? parse_matmul_precision(v)
                                                           : MatmulPrecision::highest);
  }()};
  return p;
}

thread_local int tls_override = -1;  // -1: no guard active on this thread

}  // namespace

const char* name(MatmulPrecision precision) {
  switch (precision) {
    case MatmulPrecision::high: return "high";
    case MatmulPrecision::medium: return "medium";
    case MatmulPrecision::highest: break;
  }
  return "highest";
}

MatmulPrecision parse_matmul_precision(std::string_view text) {
  if (text == "highest") return MatmulPrecision::highest;
  if (text == "high") return MatmulPrecision::high;
  if (text == "medium") return MatmulPrecision::medium;
  MIXPREC_CHECK(false, ValueError, "matmul_precision",
                "unknown matmul precision '" << text << "'; use highest, high or medium");
  return MatmulPrecision::highest;
}

void set_matmul_precision(MatmulPrecision precision) {
  global_precision().store(static_cast<int>(precision), std::memory_order_relaxed);
}

MatmulPrecision matmul_precision() {
  const int v = tls_override >= 0 ? tls_override : global_precision().load(std::memory_order_relaxed);
  return static_cast<MatmulPrecision>(v);
}

MatmulPrecisionGuard::MatmulPrecisionGuard(MatmulPrecision precision) : previous_(tls_override) {
  tls_override = static_cast<int>(precision);
}

MatmulPrecisionGuard::~MatmulPrecisionGuard() { tls_override = previous_; }

}  // namespace mixprec::runtime
