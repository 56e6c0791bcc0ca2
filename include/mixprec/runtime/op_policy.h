#pragma once
/// The autocast policy table: for every op, which dtype it computes in under amp::Autocast.
/// This is the single source of truth; `mixprec ops` prints it and docs/autocast.md explains it.
#include <array>
#include <cstdint>
#include <string>

#include "mixprec/core/dtype.h"

namespace mixprec::amp {

/// Every op that consults the autocast policy.
enum class OpKind : std::uint8_t {
  // lower precision: GEMM-bound, where 16-bit inputs pay off and fp32 accumulation keeps accuracy
  matmul, bmm, linear, addmm, conv2d,
  // fp32: range- or accumulation-sensitive
  softmax, log_softmax, cross_entropy, mse_loss, exp, log, pow, reciprocal, rsqrt, sum, mean,
  norm, cumsum, layer_norm,
  // promote: combine inputs of different dtypes in the widest one
  add, sub, mul, div, maximum, minimum, cat, stack, where,
  // pass-through: run in whatever dtype the input has
  neg, abs, sqrt, square, relu, gelu, tanh, sigmoid, affine, amax, dropout, batch_norm, max_pool2d, avg_pool2d,
  // appended (rows are in enum order; new ops go at the end)
  scaled_dot_product_attention,  // lower precision: two GEMMs, softmax kept in fp32 inside
  // transformer ops (pass-through): embedding lookup and masking
  embedding, masked_fill,
};

/// What autocast does with an op's floating-point inputs.
enum class CastPolicy : std::uint8_t {
  lower_precision,  ///< cast to the region's lower dtype (bf16 or f16); output in that dtype
  fp32,             ///< cast 16-bit inputs to f32; output f32
  promote,          ///< cast every input to the widest input dtype; output that dtype
  pass_through,     ///< no casts; output in the input dtype
};

/// One row of the table.
struct OpPolicy {
  OpKind op;
  const char* name;
  CastPolicy policy;
  const char* why;  ///< one line of rationale, printed by `mixprec ops`
};

/// The table, indexed by static_cast<size_t>(OpKind).
extern const std::array<OpPolicy, 45> kOpPolicyTable;

/// The row of an op.
const OpPolicy& policy_row(OpKind op);
/// Name of an op, e.g. "linear".
inline const char* name(OpKind op) { return policy_row(op).name; }
/// "lower_precision", "fp32", "promote", "pass_through".
const char* name(CastPolicy policy);
/// The dtype an op with a single input of dtype `in` produces under a region with `lower`
/// (what the table documents; tests check every op against it).
DType documented_output_dtype(OpKind op, DType in, DType lower);
/// The table as aligned text (one op per line: name, policy, rationale).
std::string format_policy_table();

}  // namespace mixprec::amp
