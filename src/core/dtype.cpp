#include "mixprec/core/dtype.h"

namespace mixprec {

DType parse_dtype(std::string_view text) {
  if (text == "f32" || text == "fp32" || text == "float32" || text == "float") return DType::f32;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  if (text == "f16" || text == "fp16" || text == "float16" || text == "half") return DType::f16;
  MIXPREC_CHECK(false, ValueError, "parse_dtype",
                "unknown dtype '" << text << "'; use one of f32, bf16, f16");
  return DType::f32;
}

}  // namespace mixprec
