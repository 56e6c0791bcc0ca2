#include "mixprec/runtime/op_policy.h"

#include <algorithm>
#include <sstream>

namespace mixprec::runtime {

const std::array<OpPolicy, kOpKindCount> kOpPolicyTable{{
#define MIXPREC_ROW_OTHER(op, policy, why) {OpKind::op, #op, CastPolicy::policy, why},
#define MIXPREC_ROW_UNARY(op, api, policy, reads, grad, simd, ref, lo, hi, why) \
  MIXPREC_OP_IF_##policy({OpKind::op, #op, CastPolicy::policy, why},)
#define MIXPREC_ROW_BINARY(op, api, policy, why) \
  MIXPREC_OP_IF_##policy({OpKind::op, #op, CastPolicy::policy, why},)
    MIXPREC_AUTOCAST_OPS(MIXPREC_ROW_OTHER)
    MIXPREC_UNARY_OPS(MIXPREC_ROW_UNARY)
    MIXPREC_BINARY_OPS(MIXPREC_ROW_BINARY)
#undef MIXPREC_ROW_OTHER
#undef MIXPREC_ROW_UNARY
#undef MIXPREC_ROW_BINARY
}};

const OpPolicy& policy_row(OpKind op) {
  const OpPolicy& row = kOpPolicyTable[static_cast<std::size_t>(op)];
  MIXPREC_ASSERT(row.op == op);  // the table must stay in enum order
  return row;
}

const char* name(CastPolicy policy) {
  switch (policy) {
    case CastPolicy::lower_precision: return "lower_precision";
    case CastPolicy::fp32: return "fp32";
    case CastPolicy::fp32_to_lower: return "fp32_to_lower";
    case CastPolicy::promote: return "promote";
    case CastPolicy::pass_through: return "pass_through";
  }
  return "?";
}

DType documented_output_dtype(OpKind op, DType in, DType lower) {
  switch (policy_row(op).policy) {
    case CastPolicy::lower_precision:
    case CastPolicy::fp32_to_lower: return lower;
    case CastPolicy::fp32: return DType::f32;
    case CastPolicy::promote:
    case CastPolicy::pass_through: return in;
  }
  return in;
}

std::string format_policy_table() {
  // The op column is as wide as the longest name plus two spaces, so every row lines up.
  std::size_t width = 2;
  for (const OpPolicy& row : kOpPolicyTable) width = std::max(width, std::string(row.name).size() + 2);
  std::ostringstream os;
  std::string head = "op";
  head.resize(width, ' ');
  os << head << "policy           why\n";
  // Grouped by policy, in list order within a group.
  for (CastPolicy group : {CastPolicy::lower_precision, CastPolicy::fp32, CastPolicy::fp32_to_lower,
                           CastPolicy::promote,
                           CastPolicy::pass_through}) {
    for (const OpPolicy& row : kOpPolicyTable) {
      if (row.policy != group) continue;
      std::string n = row.name, p = name(row.policy);
      n.resize(width, ' ');
      p.resize(17, ' ');
      os << n << p << row.why << '\n';
    }
  }
  return os.str();
}

}  // namespace mixprec::runtime
