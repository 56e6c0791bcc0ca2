// The fp8 recipe's names and checks (mixprec/runtime/fp8_recipe.h).
#include "mixprec/runtime/fp8_recipe.h"

#include <string>

#include "mixprec/core/error.h"

namespace mixprec::runtime {

void Fp8Recipe::validate() const {
  MIXPREC_CHECK(amax_history >= 1, ValueError, "fp8 recipe",
                "amax history length must be at least 1, got " << amax_history);
  MIXPREC_CHECK(margin >= 0 && margin <= 64, ValueError, "fp8 recipe",
                "margin must be in [0, 64], got " << margin);
}

const char* name(Fp8Scaling scaling) {
  return scaling == Fp8Scaling::current ? "current" : "delayed";
}

const char* name(Fp8Formats formats) { return formats == Fp8Formats::hybrid ? "hybrid" : "e4m3"; }

Fp8Formats parse_fp8_formats(std::string_view text) {
  if (text == "hybrid") return Fp8Formats::hybrid;
  if (text == "e4m3") return Fp8Formats::e4m3;
  MIXPREC_CHECK(false, ValueError, "fp8 recipe",
                "unknown fp8 format '" << text << "': use hybrid (E4M3 forward, E5M2 gradients) "
                                          "or e4m3");
  return Fp8Formats::hybrid;
}

std::string to_string(const Fp8Recipe& r) {
  return std::string(name(r.scaling)) + ", history " + std::to_string(r.history_length()) +
         ", margin " + std::to_string(r.margin) + ", " + name(r.formats);
}

}  // namespace mixprec::runtime
