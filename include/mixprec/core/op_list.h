#pragma once
/// The one list of ops: every fact about an op that more than one place needs, written once.
/// Generated from it: kernels::UnaryOp and BinaryOp with their names and whether a gradient
/// reads x (src/kernels/elementwise.h), the switches that pick each op's math in the reference
/// and the vector kernels, runtime::OpKind and the autocast policy table (mixprec/runtime/op_policy.h),
/// the differentiable functions neg(x) ... sigmoid(x), add(a, b) ... (mixprec/ops/elementwise.h),
/// and the op lists of the tests (elementwise, conformance, autocast).
///
/// X-macros rather than constexpr arrays: the enums themselves are generated from the list,
/// and a constexpr array cannot declare enumerators or functions.
///
/// Adding a unary op `foo` (silu shows it):
///   1. one X(...) row below;
///   2. its scalar math, forward and backward (kernels::math::foo in src/kernels/spec/elementwise_math.h:
///      the reference, and any device compiler's);
///   3. its vector math (kernels::cpu::vec::foo in src/kernels/cpu/vecmath-inl.h).
/// Every table, switch, frontend function and test case follows from the row.
///
/// Columns of a unary row:
///   name    the op (an identifier: enumerator, function and kernel name)
///   api     fn: a differentiable mixprec::name(x) is generated; internal: reached another way
///           (gelu_tanh through gelu(x, GeluApproximation::tanh))
///   policy  autocast row: lower_precision | fp32 | promote | pass_through, or none (no row of
///           its own: the op that reaches it names the row)
///   reads   x | y: the backward formula reads the forward input x or the output y
///   grad    exact: the vector backward is bit-identical to the reference's; ulps: it
///           recomputes a transcendental, held to the accuracy bound below relative to |dy|
///   simd, ref  accuracy: max error in f32 ulps of the exact result, of the vector code on
///           every target and of the reference; 0 = exact IEEE operations, bit-identical to the
///           reference (measured by ElementwiseVecMath.AccuracyAgainstDoublePrecision)
///   lo, hi  a domain where tests draw inputs (positive where the op needs it)
///   why     the autocast rationale that `mixprec ops` prints
///
/// Accuracy notes: "FMA targets" (AVX2, AVX3, NEON, SVE) give the same bits per lane; SSE4 and
/// the scalar fallback compute a*b+c with two roundings. gelu is x Phi(x) via erfc (no
/// cancellation of 1 + erf); gelu_tanh is x / (1 + e^-w), w = x (c1 + c2 x^2), the tanh form
/// without the cancellation of 1 + tanh; silu is x sigmoid(x) from e^-|x| (no overflow). Below
/// their ranges (exp < -104, sigmoid < -88.72, gelu_tanh < -10.07) results underflow to 0 in
/// every implementation. The bounds' domains are in src/kernels/elementwise.h.
#define MIXPREC_UNARY_OPS(X)                                                                     \
  /*  name        api       policy        reads grad   simd ref  lo     hi     why */           \
  X(neg,        fn,       pass_through, y,    exact, 0.0, 0.0, -10.f, 10.f,  "exact in any dtype")   \
  X(abs,        fn,       pass_through, x,    exact, 0.0, 0.0, -10.f, 10.f,  "exact in any dtype")   \
  X(exp,        fn,       fp32,         y,    exact, 1.5, 1.0, -20.f, 20.f,  "overflows f16 above 11.1") \
  X(log,        fn,       fp32,         x,    exact, 1.5, 1.0, .01f,  100.f, "small arguments lose precision") \
  X(sqrt,       fn,       pass_through, y,    exact, 0.0, 0.0, .01f,  100.f, "range shrinks; safe in 16 bits") \
  X(rsqrt,      fn,       fp32,         y,    exact, 0.0, 0.0, .01f,  100.f, "1/sqrt(x) of small x overflows f16") \
  X(reciprocal, fn,       fp32,         y,    exact, 0.0, 0.0, -10.f, 10.f,  "1/x of small x overflows f16") \
  X(square,     fn,       pass_through, x,    exact, 0.0, 0.0, -10.f, 10.f,  "elementwise; follows its input") \
  X(relu,       fn,       pass_through, x,    exact, 0.0, 0.0, -10.f, 10.f,  "exact in any dtype")   \
  X(gelu,       fn,       pass_through, x,    ulps,  5.0, 4.5, -16.f, 16.f,  "computed in fp32 internally, stored in the input dtype") \
  X(tanh,       fn,       pass_through, y,    exact, 3.0, 2.5, -10.f, 10.f,  "bounded output")       \
  X(sigmoid,    fn,       pass_through, y,    exact, 2.5, 2.5, -10.f, 10.f,  "bounded output")       \
  X(gelu_tanh,  internal, none,         x,    ulps,  2.5, 2.5, -12.f, 12.f,  "")                     \
  X(silu,       fn,       pass_through, x,    ulps,  3.5, 3.5, -20.f, 20.f,  "computed in fp32 internally, stored in the input dtype")

/// Binary ops (broadcasting; computed in f32). api fn: a differentiable mixprec::name(a, b) is
/// generated (its gradient is in src/ops/elementwise_ops.cpp); internal: pow is reached through
/// pow(x, exponent), eq and ge are masks for gradients and dropout (1 where a == b, a >= b; 0
/// where either is NaN). maximum/minimum propagate NaN. pow is std::pow lane by lane.
#define MIXPREC_BINARY_OPS(X)                                                   \
  /*  name     api       policy    why */                                       \
  X(add,     fn,       promote,  "combine dtypes in the widest")                \
  X(sub,     fn,       promote,  "combine dtypes in the widest")                \
  X(mul,     fn,       promote,  "combine dtypes in the widest")                \
  X(div,     fn,       promote,  "combine dtypes in the widest")                \
  X(maximum, fn,       promote,  "combine dtypes in the widest")                \
  X(minimum, fn,       promote,  "combine dtypes in the widest")                \
  X(pow,     internal, fp32,     "large results overflow f16")                  \
  X(eq,      internal, none,     "")                                            \
  X(ge,      internal, none,     "")

/// Every other op that consults the autocast policy: its name, policy and rationale.
#define MIXPREC_AUTOCAST_OPS(X)                                                                  \
  X(matmul, lower_precision, "GEMM: 16-bit products, fp32 accumulation")                          \
  X(bmm, lower_precision, "batched GEMM")                                                         \
  X(linear, lower_precision, "GEMM plus bias")                                                    \
  X(addmm, lower_precision, "GEMM plus a matrix")                                                 \
  X(conv2d, lower_precision, "convolution: a GEMM in disguise, fp32 accumulation")                \
  X(scaled_dot_product_attention, lower_precision,                                               \
    "two GEMMs in 16 bits; scores and softmax stay fp32 inside")                                  \
  X(packed_qkv_attention, lower_precision,                                                       \
    "scaled_dot_product_attention on one packed q|k|v projection")                                \
  X(softmax, fp32, "exponentials overflow f16 and sums lose bits")                                \
  X(log_softmax, fp32, "log-sum-exp needs range and precision")                                   \
  X(cross_entropy, fp32, "losses are always fp32")                                                \
  X(mse_loss, fp32, "losses are always fp32")                                                     \
  X(sum, fp32, "long sums need fp32 output range")                                                \
  X(mean, fp32, "statistics are kept in fp32")                                                    \
  X(norm, fp32, "squares overflow f16")                                                           \
  X(cumsum, fp32, "running sums stop growing in 16 bits")                                         \
  X(layer_norm, fp32_to_lower, "statistics in fp32 inside; output in the dtype the next GEMM reads")\
  X(cat, promote, "one output dtype for all pieces")                                              \
  X(stack, promote, "one output dtype for all pieces")                                            \
  X(where, promote, "one output dtype for both branches")                                         \
  X(affine, pass_through, "scale and shift; follows its input")                                   \
  X(amax, pass_through, "exact in any dtype")                                                     \
  X(dropout, pass_through, "masking; follows its input")                                          \
  X(batch_norm, pass_through, "statistics in fp32 inside; output follows its input")              \
  X(max_pool2d, pass_through, "selects values: exact in any dtype")                               \
  X(avg_pool2d, pass_through, "sums in fp32 inside; output follows its input")                    \
  X(embedding, pass_through, "a row gather: output follows the table")                            \
  X(masked_fill, pass_through, "selects values: exact in any dtype")

/// Helpers that keep a row when a column has a given value (used as MIXPREC_OP_IF_##api(...)).
#define MIXPREC_OP_IF_fn(...) __VA_ARGS__
#define MIXPREC_OP_IF_internal(...)
#define MIXPREC_OP_IF_lower_precision(...) __VA_ARGS__
#define MIXPREC_OP_IF_fp32(...) __VA_ARGS__
#define MIXPREC_OP_IF_fp32_to_lower(...) __VA_ARGS__
#define MIXPREC_OP_IF_promote(...) __VA_ARGS__
#define MIXPREC_OP_IF_pass_through(...) __VA_ARGS__
#define MIXPREC_OP_IF_none(...)
