#pragma once
/// Precision of the probabilities and score gradients inside scaled_dot_product_attention under
/// 16-bit compute (kernels::AttentionDesc::round_probs).
/// default_: with bf16 or f16 q, k, v (autocast or cast by hand), P and dS are rounded to that
/// dtype before the products that use them (P V in the forward; P^T dO, dS K, dS^T Q in the
/// backward), as FlashAttention-2/3, cuDNN and PyTorch's SDPA do; softmax statistics and every
/// sum stay f32. It lets those products run on 16-bit tensor-core / vdpbf16ps paths.
/// highest: P and dS stay f32 in every dtype (this library's behaviour before round_probs).
/// An f32 call is f32 throughout under either setting.
#include <cstdint>
#include <string_view>

namespace mixprec::runtime {

enum class AttentionPrecision : std::uint8_t { default_, highest };

/// "default" or "highest".
const char* name(AttentionPrecision precision);
/// Parses "default"/"highest"; ValueError otherwise.
AttentionPrecision parse_attention_precision(std::string_view text);

/// Sets the process-wide default (initially default_, or MIXPREC_ATTENTION_PRECISION from the
/// env: a value parse_attention_precision does not take is an error at the first attention
/// call, not ignored).
void set_attention_precision(AttentionPrecision precision);
/// The precision attention on this thread uses now (a guard's, else the process default).
AttentionPrecision attention_precision();

/// Overrides the precision for this thread until destroyed (nests).
class AttentionPrecisionGuard {
 public:
  explicit AttentionPrecisionGuard(AttentionPrecision precision);
  ~AttentionPrecisionGuard();
  AttentionPrecisionGuard(const AttentionPrecisionGuard&) = delete;
  AttentionPrecisionGuard& operator=(const AttentionPrecisionGuard&) = delete;

 private:
  int previous_;
};

}  // namespace mixprec::runtime
