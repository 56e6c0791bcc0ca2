// The names of the wire formats of runtime::Communicator.
#include "mixprec/runtime/communicator.h"

#include "mixprec/core/error.h"

namespace mixprec::runtime {

const char* name(WireDType wire) {
  switch (wire) {
    case WireDType::bf16: return "bf16";
    case WireDType::f16: return "fp16";
    case WireDType::f32: break;
  }
  return "fp32";
}

WireDType parse_wire_dtype(std::string_view text, const char* flag) {
  if (text == "fp32") return WireDType::f32;
  if (text == "bf16") return WireDType::bf16;
  if (text == "fp16") return WireDType::f16;
  MIXPREC_CHECK(false, ValueError, flag,
                "unknown wire format '" << text << "'; choose fp32, bf16 (half the bytes, f32 range) "
                                        << "or fp16 (half the bytes; scaled gradients beyond 65504 "
                                        << "become Inf and the step is skipped)");
  return WireDType::f32;
}

}  // namespace mixprec::runtime
