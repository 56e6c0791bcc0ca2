#include "mixprec/runtime/op_policy.h"

#include <algorithm>
#include <sstream>

namespace mixprec::amp {

namespace {
constexpr CastPolicy L = CastPolicy::lower_precision;
constexpr CastPolicy F = CastPolicy::fp32;
constexpr CastPolicy P = CastPolicy::promote;
constexpr CastPolicy T = CastPolicy::pass_through;
}  // namespace

const std::array<OpPolicy, 45> kOpPolicyTable{{
    {OpKind::matmul, "matmul", L, "GEMM: 16-bit products, fp32 accumulation"},
    {OpKind::bmm, "bmm", L, "batched GEMM"},
    {OpKind::linear, "linear", L, "GEMM plus bias"},
    {OpKind::addmm, "addmm", L, "GEMM plus a matrix"},
    {OpKind::conv2d, "conv2d", L, "convolution: a GEMM in disguise, fp32 accumulation"},
    {OpKind::softmax, "softmax", F, "exponentials overflow f16 and sums lose bits"},
    {OpKind::log_softmax, "log_softmax", F, "log-sum-exp needs range and precision"},
    {OpKind::cross_entropy, "cross_entropy", F, "losses are always fp32"},
    {OpKind::mse_loss, "mse_loss", F, "losses are always fp32"},
    {OpKind::exp, "exp", F, "overflows f16 above 11.1"},
    {OpKind::log, "log", F, "small arguments lose precision"},
    {OpKind::pow, "pow", F, "large results overflow f16"},
    {OpKind::reciprocal, "reciprocal", F, "1/x of small x overflows f16"},
    {OpKind::rsqrt, "rsqrt", F, "1/sqrt(x) of small x overflows f16"},
    {OpKind::sum, "sum", F, "long sums need fp32 output range"},
    {OpKind::mean, "mean", F, "statistics are kept in fp32"},
    {OpKind::norm, "norm", F, "squares overflow f16"},
    {OpKind::cumsum, "cumsum", F, "running sums stop growing in 16 bits"},
    {OpKind::layer_norm, "layer_norm", F, "mean and variance of a row need fp32"},
    {OpKind::add, "add", P, "combine dtypes in the widest"},
    {OpKind::sub, "sub", P, "combine dtypes in the widest"},
    {OpKind::mul, "mul", P, "combine dtypes in the widest"},
    {OpKind::div, "div", P, "combine dtypes in the widest"},
    {OpKind::maximum, "maximum", P, "combine dtypes in the widest"},
    {OpKind::minimum, "minimum", P, "combine dtypes in the widest"},
    {OpKind::cat, "cat", P, "one output dtype for all pieces"},
    {OpKind::stack, "stack", P, "one output dtype for all pieces"},
    {OpKind::where, "where", P, "one output dtype for both branches"},
    {OpKind::neg, "neg", T, "exact in any dtype"},
    {OpKind::abs, "abs", T, "exact in any dtype"},
    {OpKind::sqrt, "sqrt", T, "range shrinks; safe in 16 bits"},
    {OpKind::square, "square", T, "elementwise; follows its input"},
    {OpKind::relu, "relu", T, "exact in any dtype"},
    {OpKind::gelu, "gelu", T, "computed in fp32 internally, stored in the input dtype"},
    {OpKind::tanh, "tanh", T, "bounded output"},
    {OpKind::sigmoid, "sigmoid", T, "bounded output"},
    {OpKind::affine, "affine", T, "scale and shift; follows its input"},
    {OpKind::amax, "amax", T, "exact in any dtype"},
    {OpKind::dropout, "dropout", T, "masking; follows its input"},
    {OpKind::batch_norm, "batch_norm", T, "statistics in fp32 inside; output follows its input"},
    {OpKind::max_pool2d, "max_pool2d", T, "selects values: exact in any dtype"},
    {OpKind::avg_pool2d, "avg_pool2d", T, "sums in fp32 inside; output follows its input"},
    {OpKind::scaled_dot_product_attention, "scaled_dot_product_attention", L,
     "two GEMMs in 16 bits; scores and softmax stay fp32 inside"},
    // transformer ops: embedding lookup and masking
    {OpKind::embedding, "embedding", T, "a row gather: output follows the table"},
    {OpKind::masked_fill, "masked_fill", T, "selects values: exact in any dtype"},
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
    case CastPolicy::promote: return "promote";
    case CastPolicy::pass_through: return "pass_through";
  }
  return "?";
}

DType documented_output_dtype(OpKind op, DType in, DType lower) {
  switch (policy_row(op).policy) {
    case CastPolicy::lower_precision: return lower;
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
  for (const OpPolicy& row : kOpPolicyTable) {
    std::string n = row.name, p = name(row.policy);
    n.resize(width, ' ');
    p.resize(17, ' ');
    os << n << p << row.why << '\n';
  }
  return os.str();
}

}  // namespace mixprec::amp
