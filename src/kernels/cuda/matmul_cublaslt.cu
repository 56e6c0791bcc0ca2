// kernels::matmul on the GPU: cuBLASLt GEMMs, f32 accumulation (TF32 Tensor Cores for f32
// inputs only when desc.tf32 allows it; bf16_fpmath is the CPU's knob and is ignored here), and
// a finishing kernel for what cuBLASLt's epilogues cannot compute as the spec does.
//
// Row-major operands: a row-major [r, c] buffer is a column-major [c, r] one with ld c, so
// C = op(A) op(B) (row-major [m, n]) is computed as the column-major C^T = op(B)^T op(A)^T
// ([n, m], ld n): our B is cuBLASLt's A and our A its B, each with its own transpose flag, and
// nothing is copied. The alternative, CUBLASLT_ORDER_ROW layouts, is taken by fewer of
// cuBLASLt's kernels (the Tensor Core ones want column order). With the swap, the rows of
// cuBLASLt's D are C's columns, so its bias epilogue (one value per row of D, broadcast along
// the row) adds the [N] bias to C's columns, as the spec says.
//
// What cuBLASLt writes into C directly (D = C): op(A) op(B) [+ bias] [+ C], the bias through
// CUBLASLT_EPILOGUE_BIAS when it has C's dtype (cuBLASLt's bias has D's type), accumulate as
// beta = 1: one rounding to c_dtype of an f32 value, as the spec. What it cannot: relu (its
// RELU epilogue is max(x, 0), which turns NaN into 0, where the spec's relu passes NaN through
// (reported on NVIDIA's forum, "Incorrect result of cublasLtMatmul with CUBLASLT_EPILOGUE_RELU
// when input is NaN"); and with accumulate it would apply relu after adding C), and an f32 bias
// with a 16-bit C. Those write the f32 product to scratch, and the finishing kernel computes
// the spec's tail, math::matmul_epilogue (kernels/spec/matmul_math.h, the reference's own code):
// C = round([C +] post_op(product [+ bias])). k == 0 is the finishing kernel on a zero product.
// The gelu_tanh post-op and its backward form go to matmul_gelu.cu, which asks this file for
// cuBLASLt's GELU epilogues (gelu_gemm_cublaslt: the same plans, with the epilogue, the aux
// matrix and the bias gradient in the key) and falls back to our kernels where they refuse.
//
// Deterministic: each problem's algorithm is chosen once (the plan cache) by cuBLASLt's
// heuristic, itself a function of the problem and the GPU; cuBLAS gives the same bits run to
// run for a fixed algorithm on GPUs of the same architecture and SM count, with work on one
// stream (cuBLAS docs, "Results reproducibility"). The heuristic may only pick split-K schemes that keep the spec's one
// rounding: none, or f32 partial products summed in a separate pass (COMPUTE_TYPE); never
// INPLACE or OUTPUT_TYPE, which round the partial sums to C's dtype.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_cublaslt.h"
#include "kernels/matmul.h"
#include "kernels/spec/matmul_math.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels::cuda {
namespace {

/// cuBLASLt's recommendation for Hopper; plenty for Ampere.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
/// Plans kept before the cache empties itself (a training run has a few per Linear layer).
constexpr std::size_t kPlanCacheCapacity = 256;
/// cuBLASLt's own default alignment preference, and the most any of its kernels asks for.
constexpr std::uint32_t kMaxAlignment = 256;

const char* or_unknown(const char* s) { return s != nullptr ? s : "unknown status"; }

/// Throws BackendError naming the cuBLASLt call and its status.
void check_lt(cublasStatus_t status, const char* call) {
  MIXPREC_CHECK(status == CUBLAS_STATUS_SUCCESS, BackendError, "matmul",
                call << " failed: " << or_unknown(cublasLtGetStatusName(status)) << " ("
                     << or_unknown(cublasLtGetStatusString(status)) << ")");
}

cudaDataType lt_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    case DType::f8e4m3: return CUDA_R_8F_E4M3;  // fp8 GEMMs (fp8_gemm_cublaslt) only
    case DType::f8e5m2: return CUDA_R_8F_E5M2;
    default: break;  // validate_matmul and validate_fp8_gemm admit no other dtype
  }
  MIXPREC_ASSERT(false);
  return CUDA_R_32F;
}

/// The largest power of two (up to kMaxAlignment) dividing p's address: the heuristic must
/// only pick kernels that can read the operands where they are (a view may start mid-block).
std::uint32_t alignment(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lowest_bit = addr & (~addr + 1);
  return lowest_bit == 0 || lowest_bit > kMaxAlignment ? kMaxAlignment
                                                        : static_cast<std::uint32_t>(lowest_bit);
}

// ---- the process's handle and workspace

struct Context {
  cublasLtHandle_t handle;
  void* workspace;  ///< kWorkspaceBytes of device memory, shared by every call
};

Context* create_context() {
  cublasLtHandle_t handle = nullptr;
  check_lt(cublasLtCreate(&handle), "cublasLtCreate");
  void* workspace = mixprec::detail::cuda_block_cache().acquire(kWorkspaceBytes);
  if (workspace == nullptr) {
    (void)cublasLtDestroy(handle);
    MIXPREC_CHECK(false, BackendError, "matmul",
                  "out of device memory for cuBLASLt's " << (kWorkspaceBytes >> 20)
                                                         << " MiB workspace");
  }
  return new Context{handle, workspace};
}

/// Created on the first GEMM, on the device current then (the process uses one: set_device),
/// thread-safe (a function-local static; retried if creation threw). Never destroyed: static
/// objects may still run GEMMs at exit, and cuBLASLt must not be torn down after the runtime.
/// One workspace serves all threads because every call runs on stream(), one stream, which
/// orders the GEMMs that use it; a stream per thread would need a workspace per stream.
const Context& context() {
  static const Context* const ctx = create_context();
  return *ctx;
}

// ---- plans: descriptors, layouts and the chosen algorithm, per problem

/// Everything a plan depends on. out_dtype is D's (C's, or f32 for a scratch product); a bias
/// has bias_dtype (out_dtype, except a GELU epilogue's bias gradient). Alignments are in bytes
/// (powers of two up to 256): the chosen algorithm is only valid for operands at least that
/// aligned (cuBLASLt's heuristic reads the bias and aux pointers' values for theirs). dtype is
/// our A's, b_dtype our B's (they differ only in fp8 GEMMs, E5M2 gradients times E4M3
/// operands); scaled: fp8 operands with device scale pointers (set per call, like the bias and
/// aux); fast_accum: fp8's FAST_ACCUM; gelu: one of the GELU epilogues (matmul_gelu.cu).
struct Key {
  std::int64_t m, n, k;
  bool trans_a, trans_b;
  DType dtype, out_dtype;
  DType b_dtype;
  bool scaled, fast_accum;
  bool bias;
  DType bias_dtype;
  LtGelu gelu;
  bool accumulate;
  bool tf32;
  std::int64_t batch;  ///< matrices back to back (strided batch); 1: one GEMM
  std::uint32_t align_a, align_b, align_out, align_bias, align_aux;
  bool operator==(const Key&) const = default;
};

void hash_mix(std::size_t& h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
}

struct KeyHash {
  std::size_t operator()(const Key& key) const noexcept {
    std::size_t h = 0;
    hash_mix(h, static_cast<std::uint64_t>(key.m));
    hash_mix(h, static_cast<std::uint64_t>(key.n));
    hash_mix(h, static_cast<std::uint64_t>(key.k));
    hash_mix(h, static_cast<std::uint64_t>(key.batch));
    hash_mix(h, static_cast<std::uint64_t>(key.trans_a) | std::uint64_t{key.trans_b} << 1 |
                    std::uint64_t{key.bias} << 2 | std::uint64_t{key.accumulate} << 3 |
                    std::uint64_t{key.tf32} << 4 | std::uint64_t{key.scaled} << 5 |
                    std::uint64_t{key.fast_accum} << 6 | static_cast<std::uint64_t>(key.dtype) << 8 |
                    static_cast<std::uint64_t>(key.out_dtype) << 16 |
                    static_cast<std::uint64_t>(key.b_dtype) << 24);
    hash_mix(h, std::uint64_t{key.align_a} | std::uint64_t{key.align_b} << 16 |
                    std::uint64_t{key.align_out} << 32 | std::uint64_t{key.align_bias} << 48);
    hash_mix(h, std::uint64_t{key.align_aux} | static_cast<std::uint64_t>(key.gelu) << 32 |
                    static_cast<std::uint64_t>(key.bias_dtype) << 40);
    return h;
  }
};

/// Names follow cuBLASLt's roles: lt_a is our B, lt_b our A, lt_d both C and D (in place).
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, lt_d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// A GELU epilogue cuBLASLt has no algorithm for, or whose call it refused: remembered, so
  /// the problem goes to the fallback without asking again.
  std::atomic<bool> refused{false};
  /// The bias, aux and scale pointers are attributes of op: held from setting them until
  /// cublasLtMatmul has read them, so two threads running the same plan cannot swap them.
  std::mutex pointers_mu;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    // Host objects only: safe while GEMMs that used them are still running on the device.
    if (lt_d != nullptr) (void)cublasLtMatrixLayoutDestroy(lt_d);
    if (lt_b != nullptr) (void)cublasLtMatrixLayoutDestroy(lt_b);
    if (lt_a != nullptr) (void)cublasLtMatrixLayoutDestroy(lt_a);
    if (op != nullptr) (void)cublasLtMatmulDescDestroy(op);
  }
};

template <class T>
void set_op_attribute(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attribute,
                      const T& value) {
  check_lt(cublasLtMatmulDescSetAttribute(op, attribute, &value, sizeof(value)),
           "cublasLtMatmulDescSetAttribute");
}

template <class T>
void set_preference(cublasLtMatmulPreference_t pref,
                    cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)),
           "cublasLtMatmulPreferenceSetAttribute");
}

struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* pref) const {
    (void)cublasLtMatmulPreferenceDestroy(pref);
  }
};

std::string describe(const Key& key) {
  return std::string(name(key.dtype)) + (key.b_dtype != key.dtype ? std::string(" x ") + name(key.b_dtype) : std::string()) + " " + std::to_string(key.m) + "x" +
         std::to_string(key.n) + "x" + std::to_string(key.k) + (key.trans_a ? " A^T" : "") +
         (key.trans_b ? " B^T" : "") + " -> " + name(key.out_dtype) +
         (key.bias ? " + bias" : "") + (key.gelu != LtGelu::none ? " + gelu epilogue" : "") +
         (key.tf32 ? " (tf32)" : "") +
         (key.batch > 1 ? " x " + std::to_string(key.batch) : "");
}

/// Device pointers an fp8 GEMM passes per call: the f32 factors cuBLASLt multiplies our A's and
/// our B's values by (the reciprocals of their quantisation scales).
struct OperandScales {
  const float* a = nullptr;
  const float* b = nullptr;
};

/// cuBLASLt's epilogue for a key: a GELU epilogue (with the bias, the aux matrix, the bias
/// gradient as the key says), else the bias epilogue when there is a bias.
cublasLtEpilogue_t epilogue_of(const Key& key) {
  switch (key.gelu) {
    case LtGelu::forward: return key.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    case LtGelu::forward_aux:
      return key.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case LtGelu::backward: return CUBLASLT_EPILOGUE_DGELU;
    case LtGelu::backward_bgrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case LtGelu::none: break;
  }
  return key.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

bool has_aux(LtGelu gelu) { return gelu != LtGelu::none && gelu != LtGelu::forward; }

/// The plan for key; bias, aux and scales (device, only their addresses are read) are the
/// first call's, which the heuristic looks at. Returns null instead of throwing when cuBLASLt
/// has no algorithm for a scaled (fp8) key or a GELU epilogue: their callers have kernels of
/// their own for those.
std::shared_ptr<Plan> create_plan(const Context& ctx, const Key& key, const void* bias,
                                  const void* aux, const OperandScales& scales) {
  auto plan = std::make_shared<Plan>();
  check_lt(cublasLtMatmulDescCreate(&plan->op,
                                    key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                    CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  const std::int32_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const std::int32_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  if (const std::uint32_t epilogue = epilogue_of(key); epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  }
  if (key.bias) {  // a bias, or DGELU_BGRAD's bias gradient (written)
    const std::int32_t bias_type = lt_type(key.bias_dtype);
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  if (has_aux(key.gelu)) {
    // The pre-activation: our [m, n] row-major = column-major [n, m], ld n (cuBLASLt's D rows);
    // its type is D's (the attribute's default).
    const std::int64_t aux_ld = key.n;
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
  }
  if (key.scaled) {  // cuBLASLt's A is our B: the scales swap roles with the operands
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scales.b);
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scales.a);
    const std::int8_t fast = key.fast_accum ? 1 : 0;
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast);
  }

  // Stored shapes, column-major: our B is [k, n] row-major = [n, k] column-major (ld n), or
  // [n, k] row-major = [k, n] column-major (ld k) when trans_b; likewise our A.
  const auto m = static_cast<std::uint64_t>(key.m);
  const auto n = static_cast<std::uint64_t>(key.n);
  const auto k = static_cast<std::uint64_t>(key.k);
  const cudaDataType in_a = lt_type(key.dtype), in_b = lt_type(key.b_dtype);
  check_lt(key.trans_b ? cublasLtMatrixLayoutCreate(&plan->lt_a, in_b, k, n, key.k)
                       : cublasLtMatrixLayoutCreate(&plan->lt_a, in_b, n, k, key.n),
           "cublasLtMatrixLayoutCreate (B)");
  check_lt(key.trans_a ? cublasLtMatrixLayoutCreate(&plan->lt_b, in_a, m, k, key.m)
                       : cublasLtMatrixLayoutCreate(&plan->lt_b, in_a, k, m, key.k),
           "cublasLtMatrixLayoutCreate (A)");
  check_lt(cublasLtMatrixLayoutCreate(&plan->lt_d, lt_type(key.out_dtype), n, m, key.n),
           "cublasLtMatrixLayoutCreate (C)");
  if (key.batch > 1) {  // each operand's matrices back to back
    const auto count = static_cast<std::int32_t>(key.batch);
    const std::pair<cublasLtMatrixLayout_t, std::int64_t> strided[] = {
        {plan->lt_a, key.k * key.n}, {plan->lt_b, key.m * key.k}, {plan->lt_d, key.m * key.n}};
    for (const auto& [layout, stride] : strided) {
      check_lt(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof(count)),
               "cublasLtMatrixLayoutSetAttribute (batch count)");
      check_lt(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof(stride)),
               "cublasLtMatrixLayoutSetAttribute (batch stride)");
    }
  }

  cublasLtMatmulPreference_t raw_pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&raw_pref), "cublasLtMatmulPreferenceCreate");
  const std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter> pref(raw_pref);
  const std::uint64_t workspace_bytes = kWorkspaceBytes;
  const std::uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_NONE |
                                   CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes);
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reductions);
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_out);
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_out);

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(
      ctx.handle, plan->op, plan->lt_a, plan->lt_b, plan->lt_d, plan->lt_d, raw_pref, 1, &result,
      &found);
  if ((key.scaled || key.gelu != LtGelu::none) &&
      (heuristic != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS)) {
    return nullptr;  // e.g. a shape, alignment or epilogue these kernels do not take
  }
  check_lt(heuristic, "cublasLtMatmulAlgoGetHeuristic");
  MIXPREC_CHECK(found > 0 && result.state == CUBLAS_STATUS_SUCCESS, BackendError, "matmul",
                "cuBLASLt has no algorithm for a " << describe(key) << " GEMM within a "
                    << (kWorkspaceBytes >> 20) << " MiB workspace without split-K rounding"
                    << (found > 0 ? std::string(": ") + or_unknown(cublasLtGetStatusName(
                                                            result.state))
                                  : std::string()));
  plan->algo = result.algo;
  return plan;
}

/// Bounded and thread-safe: when full it empties itself (callers keep the plans they hold).
class PlanCache {
 public:
  std::shared_ptr<Plan> find(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : it->second;
  }
  /// Inserts unless another thread raced us to it; returns the plan now cached.
  std::shared_ptr<Plan> insert(const Key& key, std::shared_ptr<Plan> plan) {
    std::lock_guard<std::mutex> lock(mu_);
    if (const auto it = plans_.find(key); it != plans_.end()) return it->second;
    if (plans_.size() >= kPlanCacheCapacity) plans_.clear();
    plans_.emplace(key, plan);
    return plan;
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return plans_.size();
  }

 private:
  std::mutex mu_;
  std::unordered_map<Key, std::shared_ptr<Plan>, KeyHash> plans_;
};

/// Never destroyed, like the context (plans may be in use at exit).
PlanCache& plan_cache() {
  static PlanCache* const cache = new PlanCache;
  return *cache;
}

/// How a GEMM went: whether its plan came from the cache, and whether it ran at all (an fp8
/// GEMM or a GELU epilogue cuBLASLt has no algorithm for, or refuses, does not).
struct GemmRun {
  bool cached = false;
  bool ran = true;
};

/// out = alpha op(A) op(B) [+ bias] [+ out] by one cuBLASLt call, out [m, n] row-major of
/// out_dtype, bias (null: none) of out_dtype; batch > 1: that many problems, each operand's
/// matrices back to back. fp8 (non-null fp8): B of fp8->b_dtype, operands multiplied by the
/// device factors fp8->scales, fp8->fast_accum; such a GEMM may not run (GemmRun::ran).
struct Fp8Operands {
  DType b_dtype;
  OperandScales scales;
  bool fast_accum;
};
/// A GELU epilogue's extra operands: which epilogue, the aux matrix (written forward, read
/// backward; [m, n] of out_dtype, ld n) and the bias's or bias gradient's dtype (bias is the
/// gradient's buffer for backward_bgrad). Such a GEMM may not run either.
struct GeluOperands {
  LtGelu kind;
  const void* aux;
  DType bias_dtype;
};
GemmRun gemm(const MatmulDesc& d, const void* a, const void* b, const void* bias, void* out,
             DType out_dtype, bool accumulate, std::int64_t batch = 1, float alpha = 1.0f,
             const Fp8Operands* fp8 = nullptr, const GeluOperands* gelu = nullptr) {
  const Context& ctx = context();
  const void* aux = gelu != nullptr ? gelu->aux : nullptr;
  const Key key{.m = d.m, .n = d.n, .k = d.k,
                .trans_a = d.trans_a, .trans_b = d.trans_b,
                .dtype = d.dtype, .out_dtype = out_dtype,
                .b_dtype = fp8 != nullptr ? fp8->b_dtype : d.dtype,
                .scaled = fp8 != nullptr,
                .fast_accum = fp8 != nullptr && fp8->fast_accum,
                .bias = bias != nullptr,
                .bias_dtype = gelu != nullptr ? gelu->bias_dtype : out_dtype,
                .gelu = gelu != nullptr ? gelu->kind : LtGelu::none,
                .accumulate = accumulate,
                .tf32 = d.tf32 && d.dtype == DType::f32,
                .batch = batch,
                .align_a = alignment(a), .align_b = alignment(b), .align_out = alignment(out),
                .align_bias = bias != nullptr ? alignment(bias) : 0,
                .align_aux = aux != nullptr ? alignment(aux) : 0};
  const OperandScales scales = fp8 != nullptr ? fp8->scales : OperandScales{};
  std::shared_ptr<Plan> plan = plan_cache().find(key);
  const bool cached = plan != nullptr;
  if (!cached) {
    // A scaled key cuBLASLt refuses is asked again next time (rare shapes; the heuristic is
    // cheap next to the GEMM the caller then runs itself); a GELU epilogue's refusal is kept.
    std::shared_ptr<Plan> created;
    if (key.gelu == LtGelu::none) {
      created = create_plan(ctx, key, bias, aux, scales);
      if (created == nullptr) return {false, false};
    } else {
      try {  // an epilogue attribute cuBLASLt refuses is a refusal too
        created = create_plan(ctx, key, bias, aux, scales);
      } catch (const BackendError&) {
        created = nullptr;
      }
    }
    if (created == nullptr) {
      created = std::make_shared<Plan>();
      created->refused = true;
    }
    plan = plan_cache().insert(key, std::move(created));
  }
  if (plan->refused) return {cached, false};

  const float beta = accumulate ? 1.0f : 0.0f;
  std::unique_lock<std::mutex> pointers_lock(plan->pointers_mu, std::defer_lock);
  if (bias != nullptr || key.scaled || aux != nullptr) pointers_lock.lock();
  if (bias != nullptr) set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (aux != nullptr) set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  if (key.scaled) {
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scales.b);
    set_op_attribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scales.a);
  }
  const cublasStatus_t status =
      cublasLtMatmul(ctx.handle, plan->op, &alpha, b, plan->lt_a, a, plan->lt_b, &beta, out,
                     plan->lt_d, out, plan->lt_d, &plan->algo, ctx.workspace, kWorkspaceBytes,
                     stream());
  if (status != CUBLAS_STATUS_SUCCESS && key.gelu != LtGelu::none) {
    // An epilogue configuration the call refuses (cuBLASLt checks some only here): the caller
    // runs its fallback, now and for every later call of this problem.
    plan->refused = true;
    return {cached, false};
  }
  check_lt(status, "cublasLtMatmul");
  return {cached, true};
}

// ---- the finishing kernel

/// c[i] = round([c[i] +] post_op(product[i] [+ bias[i % n]])), one thread per element of the
/// row-major [total / n, n] C; product null means zero (k == 0), bias null means none.
__global__ void finish_kernel(std::int64_t total, std::int64_t n, const float* product,
                              const void* bias, DType bias_dtype, bool relu, bool accumulate,
                              void* c, DType c_dtype) {
  MIXPREC_GRID_STRIDE(i, total) {
    const float acc = product != nullptr ? product[i] : 0.0f;
    const float bias_j = bias != nullptr ? load(bias, bias_dtype, i % n) : 0.0f;
    const float c_old = accumulate ? load(c, c_dtype, i) : 0.0f;
    store(c, c_dtype, i,
          math::matmul_epilogue(acc, bias != nullptr, bias_j, relu, accumulate, c_old));
  }
}

void finish(const MatmulDesc& d, const float* product, const void* bias, void* c) {
  const std::int64_t total = d.m * d.n;
  finish_kernel<<<grid(total), kThreads, 0, stream()>>>(
      total, d.n, product, d.has_bias ? bias : nullptr, d.bias_dtype,
      d.post_op == MatmulPostOp::relu, d.accumulate, c, d.c_dtype);
  check_launch("matmul (finish)");
}

void log_call(const MatmulDesc& d, const std::string& impl) {
  verbose_log("matmul", name(d.dtype), impl);
}

}  // namespace

std::size_t cublaslt_cache_size() { return plan_cache().size(); }

CublasLtRun gelu_gemm_cublaslt(const MatmulDesc& d, const void* a, const void* b,
                               const void* bias, void* c, const void* aux, LtGelu kind) {
  MIXPREC_ASSERT(kind != LtGelu::none && d.k > 0 && !d.accumulate);
  const bool backward = kind == LtGelu::backward || kind == LtGelu::backward_bgrad;
  const void* bias_arg = (backward ? kind == LtGelu::backward_bgrad : d.has_bias) ? bias : nullptr;
  const GeluOperands gelu{kind, has_aux(kind) ? aux : nullptr,
                          bias_arg != nullptr ? d.bias_dtype : d.c_dtype};
  const GemmRun run = gemm(d, a, b, bias_arg, c, d.c_dtype, false, 1, 1.0f, nullptr, &gelu);
  return {run.ran, run.cached};
}

Fp8CublasLtRun fp8_gemm_cublaslt(const Fp8GemmDesc& d, const void* a, const float* a_factor,
                                 const void* b, const float* b_factor, void* c) {
  // C = A Bᵀ with both operands k-contiguous: our B is [n, k] (trans_b), our A [m, k], which
  // after the swap above is cuBLASLt's "TN", the layout its fp8 kernels take.
  MatmulDesc rows;
  rows.m = d.m, rows.n = d.n, rows.k = d.k, rows.trans_b = true, rows.dtype = d.a_dtype;
  const Fp8Operands fp8{d.b_dtype, {a_factor, b_factor}, d.fast_accum};
  const GemmRun run = gemm(rows, a, b, nullptr, c, d.c_dtype, false, 1, 1.0f, &fp8);
  return {run.ran, run.cached};
}

void batched_gemm_f32(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                      bool trans_a, bool trans_b, float alpha, const float* a, const float* b,
                      float* c, bool tf32) {
  if (batch == 0 || m == 0 || n == 0) return;
  MatmulDesc d;
  d.m = m, d.n = n, d.k = k, d.trans_a = trans_a, d.trans_b = trans_b, d.tf32 = tf32;
  const bool cached = gemm(d, a, b, nullptr, c, DType::f32, false, batch, alpha).cached;
  if (verbose_enabled()) {
    log_call(d, std::string("cublasLt") + (tf32 ? " tf32" : "") + " batched x" +
                    std::to_string(batch) + (cached ? " (cached)" : ""));
  }
}

void matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c) {
  validate_matmul(desc, a, b, bias, c);
  if (desc.m == 0 || desc.n == 0) return;
  if (desc.post_op == MatmulPostOp::gelu_tanh) return gelu_matmul(desc, a, b, bias, c, nullptr);
  const bool verbose = verbose_enabled();
  if (desc.k == 0) {
    finish(desc, nullptr, bias, c);
    if (verbose) log_call(desc, "cuda finishing kernel (k == 0: bias/zero fill)");
    return;
  }
  const bool relu = desc.post_op == MatmulPostOp::relu;
  const char* tf32 = desc.tf32 && desc.dtype == DType::f32 ? " tf32" : "";
  if (!relu && (!desc.has_bias || desc.bias_dtype == desc.c_dtype)) {
    const bool cached = gemm(desc, a, b, desc.has_bias ? bias : nullptr, c, desc.c_dtype,
                             desc.accumulate).cached;
    if (verbose) {
      log_call(desc, std::string("cublasLt") + tf32 + (desc.has_bias ? " + bias epilogue" : "") +
                         (desc.accumulate ? " (beta 1)" : "") + (cached ? " (cached)" : ""));
    }
    return;
  }
  // relu, or an f32 bias with a 16-bit C: the f32 product, then the spec's tail.
  const std::size_t bytes =
      static_cast<std::size_t>(desc.m) * static_cast<std::size_t>(desc.n) * sizeof(float);
  const Scratch product(bytes, "matmul");
  const bool cached = gemm(desc, a, b, nullptr, product.as<float>(), DType::f32, false).cached;
  finish(desc, product.as<float>(), bias, c);
  if (verbose) {
    log_call(desc, std::string("cublasLt") + tf32 + " f32 product" + (cached ? " (cached)" : "") +
                       " + cuda finishing kernel (" + (relu ? "relu: NaN-preserving" : "f32 bias") +
                       ")");
  }
}

}  // namespace mixprec::kernels::cuda
