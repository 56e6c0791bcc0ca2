#include "mixprec/core/dtype.h"

namespace mixprec {

DType parse_dtype(std::string_view text) {
  if (text == "f32" || text == "fp32" || text == "float32" || text == "float") return DType::f32;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  if (text == "f16" || text == "fp16" || text == "float16" || text == "half") return DType::f16;
  if (text == "f8e4m3" || text == "fp8_e4m3" || text == "e4m3" || text == "float8_e4m3fn") {
    return DType::f8e4m3;
  }
  if (text == "f8e5m2" || text == "fp8_e5m2" || text == "e5m2" || text == "float8_e5m2") {
    return DType::f8e5m2;
  }
  MIXPREC_CHECK(false, ValueError, "parse_dtype",
                "unknown dtype '" << text << "'; use one of f32, bf16, f16, f8e4m3, f8e5m2");
  return DType::f32;
}

namespace detail {

void throw_storage_only(const char* op, DType t) {
  throw DTypeError(op, std::string(name(t)) +
                           " is a storage dtype: cast to f32/bf16 first (x.to(DType::f32)); fp8 "
                           "tensors support only casts, copies and views, safetensors I/O and "
                           "matmul/linear (decoded to f32)");
}

}  // namespace detail

void require_compute_dtype(const char* op, DType t) {
  if (is_storage_only(t)) [[unlikely]] detail::throw_storage_only(op, t);
}

}  // namespace mixprec
