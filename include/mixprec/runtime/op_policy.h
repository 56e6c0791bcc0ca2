#pragma once
/// The autocast policy table: for every op, which dtype it computes in under runtime::Autocast.
/// Generated from the op list (mixprec/core/op_list.h); `mixprec ops` prints it and
/// docs/autocast.md explains it.
#include <array>
#include <cstdint>
#include <string>

#include "mixprec/core/dtype.h"
#include "mixprec/core/op_list.h"

namespace mixprec::runtime {

/// Every op that consults the autocast policy: the rows of mixprec/core/op_list.h with a
/// policy (the other ops, then the unary and binary elementwise ops).
enum class OpKind : std::uint8_t {
#define MIXPREC_OPKIND_OTHER(op, ...) op,
#define MIXPREC_OPKIND_UNARY(op, api, policy, ...) MIXPREC_OP_IF_##policy(op,)
#define MIXPREC_OPKIND_BINARY(op, api, policy, ...) MIXPREC_OP_IF_##policy(op,)
  MIXPREC_AUTOCAST_OPS(MIXPREC_OPKIND_OTHER)
  MIXPREC_UNARY_OPS(MIXPREC_OPKIND_UNARY)
  MIXPREC_BINARY_OPS(MIXPREC_OPKIND_BINARY)
#undef MIXPREC_OPKIND_OTHER
#undef MIXPREC_OPKIND_UNARY
#undef MIXPREC_OPKIND_BINARY
};

/// What autocast does with an op's floating-point inputs.
enum class CastPolicy : std::uint8_t {
  lower_precision,  ///< cast to the region's lower dtype (bf16 or f16); output in that dtype
  fp32,             ///< cast 16-bit inputs to f32; output f32
  /// no casts: computes in f32 from any input dtype (widened as it loads), output in the
  /// region's lower dtype, rounded once: what the cast in front of the next lower_precision op
  /// would make, without that cast's kernel, memory or backward (docs/autocast.md)
  fp32_to_lower,
  promote,          ///< cast every input to the widest input dtype; output that dtype
  pass_through,     ///< no casts; output in the input dtype
};

/// How many ops consult the policy.
inline constexpr std::size_t kOpKindCount = 0
#define MIXPREC_COUNT_OTHER(...) +1
#define MIXPREC_COUNT_ELEMENTWISE(op, api, policy, ...) MIXPREC_OP_IF_##policy(+1)
    MIXPREC_AUTOCAST_OPS(MIXPREC_COUNT_OTHER) MIXPREC_UNARY_OPS(MIXPREC_COUNT_ELEMENTWISE)
        MIXPREC_BINARY_OPS(MIXPREC_COUNT_ELEMENTWISE);
#undef MIXPREC_COUNT_OTHER
#undef MIXPREC_COUNT_ELEMENTWISE

/// One row of the table.
struct OpPolicy {
  OpKind op;
  const char* name;
  CastPolicy policy;
  const char* why;  ///< one line of rationale, printed by `mixprec ops`
};

/// The table, indexed by static_cast<size_t>(OpKind).
extern const std::array<OpPolicy, kOpKindCount> kOpPolicyTable;

/// The row of an op.
const OpPolicy& policy_row(OpKind op);
/// Name of an op, e.g. "linear".
inline const char* name(OpKind op) { return policy_row(op).name; }
/// "lower_precision", "fp32", "fp32_to_lower", "promote", "pass_through".
const char* name(CastPolicy policy);
/// The dtype an op with a single input of dtype `in` produces under a region with `lower`
/// (what the table documents; tests check every op against it).
DType documented_output_dtype(OpKind op, DType in, DType lower);
/// The table as aligned text (one op per line: name, policy, rationale).
std::string format_policy_table();

}  // namespace mixprec::runtime
