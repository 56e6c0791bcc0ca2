// Backend selection (MIXPREC_BACKEND, set_backend) and the kernels:: entry points, each a
// forward to the active backend's table.
#include "kernels/backend.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "mixprec/core/device.h"
#include "mixprec/core/error.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

std::string& env_warning() {
  static std::string w;
  return w;
}

const Backend* from_env() {
  const char* v = std::getenv("MIXPREC_BACKEND");
  if (v == nullptr || *v == '\0') return &cpu_backend();
  const std::string_view s(v);
  if (s == "cpu") return &cpu_backend();
  if (s == "ref") return &ref_backend();
  if (s == "devsim") return &devsim_backend();  // core/device.cpp reads it too: memory follows
  env_warning() = std::string("MIXPREC_BACKEND=") + v +
                  " is not a backend (known: cpu, ref, devsim); running the cpu backend";
  std::fprintf(stderr, "mixprec: warning: %s\n", env_warning().c_str());
  return &cpu_backend();
}

std::atomic<const Backend*>& active() {
  static std::atomic<const Backend*> b{from_env()};
  return b;
}

}  // namespace

const Backend& backend() { return *active().load(std::memory_order_relaxed); }

std::string set_backend(const std::string& name) {
  const Backend* next = name == "cpu"      ? &cpu_backend()
                        : name == "ref"    ? &ref_backend()
                        : name == "devsim" ? &devsim_backend()
                                           : nullptr;
  MIXPREC_CHECK(next != nullptr, ValueError, "set_backend",
                "unknown backend '" << name << "'; known: cpu, ref, devsim");
  set_current_device(next == &devsim_backend() ? Device{DeviceType::devsim, 0} : Device{});
  return active().exchange(next)->name;
}

const Backend& host_backend() {
  const Backend& b = backend();
  return &b == &devsim_backend() ? ref_backend() : b;
}

std::string backend_env_warning() {
  (void)backend();
  return env_warning();
}

// ---- entry points ----

namespace {

/// Calls one entry of the active backend. On the reference backend the verbose log gets one
/// line per call (the cpu kernels log their own, naming the SIMD target that ran).
template <class Entry, class... Args>
decltype(auto) call(Entry Backend::*entry, const char* op, Args&&... args) {
  const Backend& b = backend();
  if (&b != &cpu_backend() && verbose_enabled()) {
    verbose_log(op, "-", b.name, b.name == std::string_view("ref") ? "MIXPREC_BACKEND=ref"
                                                                   : "MIXPREC_BACKEND=devsim");
  }
  return (b.*entry)(std::forward<Args>(args)...);
}

}  // namespace

void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype) {
  call(&Backend::unary, "unary", op, shape, in, out, out_dtype);
}
void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype) {
  call(&Backend::binary, "binary", op, shape, a, b, out, out_dtype);
}
void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta) {
  call(&Backend::affine, "affine", in, in_dtype, out, out_dtype, n, alpha, beta);
}
void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n) {
  call(&Backend::unary_backward, "unary_backward", op, x, x_dtype, y, y_dtype, dy, dy_dtype, dx, dx_dtype, n);
}
void fill(void* out, DType dtype, std::int64_t n, float value) {
  call(&Backend::fill, "fill", out, dtype, n, value);
}
void copy(std::span<const std::int64_t> shape, const StridedInput& in, const StridedOutput& out) {
  call(&Backend::copy, "copy", shape, in, out);
}
void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  call(&Backend::convert, "convert", src, src_dtype, dst, dst_dtype, n);
}
void convert_stochastic(const float* src, void* dst, DType dst_dtype, std::size_t n,
                        std::uint64_t seed, std::uint64_t offset) {
  call(&Backend::convert_stochastic, "convert_stochastic", src, dst, dst_dtype, n, seed, offset);
}
void reduce(ReduceOp op, const void* in, DType in_dtype, std::int64_t outer, std::int64_t n,
            std::int64_t inner, void* out, DType out_dtype) {
  call(&Backend::reduce, "reduce", op, in, in_dtype, outer, n, inner, out, out_dtype);
}
void softmax(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
             DType out_dtype, bool log) {
  call(&Backend::softmax, "softmax", in, in_dtype, rows, cols, out, out_dtype, log);
}
void softmax_backward(const void* y, DType y_dtype, const void* dy, DType dy_dtype,
                      std::int64_t rows, std::int64_t cols, void* dx, DType dx_dtype, bool log) {
  call(&Backend::softmax_backward, "softmax_backward", y, y_dtype, dy, dy_dtype, rows, cols, dx, dx_dtype, log);
}
void cross_entropy(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                   const std::int64_t* targets, float label_smoothing, float* loss_per_row) {
  call(&Backend::cross_entropy, "cross_entropy", logits, dtype, rows, cols, targets, label_smoothing, loss_per_row);
}
void cross_entropy_backward(const void* logits, DType dtype, std::int64_t rows,
                            std::int64_t cols, const std::int64_t* targets, float label_smoothing,
                            const float* grad_per_row, void* dlogits, DType dlogits_dtype) {
  call(&Backend::cross_entropy_backward, "cross_entropy_backward", logits, dtype, rows, cols, targets, label_smoothing,
                                   grad_per_row, dlogits, dlogits_dtype);
}
void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype) {
  call(&Backend::batch_norm_forward, "batch_norm_forward", x, x_dtype, d, weight, bias, eps, training, mean, var, y, y_dtype);
}
void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias) {
  call(&Backend::batch_norm_backward, "batch_norm_backward", x, x_dtype, dy, dy_dtype, d, mean, var, eps, weight, training, dx,
                                dx_dtype, dweight, dbias);
}
void batch_norm_stats(const void* x, DType x_dtype, BatchNormDims d, double* mean, double* m2) {
  call(&Backend::batch_norm_stats, "batch_norm_stats", x, x_dtype, d, mean, m2);
}
void batch_norm_backward_reduce(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                                BatchNormDims d, const float* mean, double* sum_dy,
                                double* sum_dy_xmu) {
  call(&Backend::batch_norm_backward_reduce, "batch_norm_backward_reduce", x, x_dtype, dy, dy_dtype, d, mean, sum_dy,
       sum_dy_xmu);
}
void batch_norm_backward_elemt(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                               BatchNormDims d, const float* mean, const float* var, float eps,
                               const float* weight, const double* sum_dy,
                               const double* sum_dy_xmu, double count, void* dx, DType dx_dtype) {
  call(&Backend::batch_norm_backward_elemt, "batch_norm_backward_elemt", x, x_dtype, dy, dy_dtype, d, mean, var, eps,
       weight, sum_dy, sum_dy_xmu, count, dx, dx_dtype);
}
void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd) {
  call(&Backend::layer_norm_forward, "layer_norm_forward", x, x_dtype, rows, cols, weight, bias, eps, y, y_dtype, mean, rstd);
}
void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias) {
  call(&Backend::layer_norm_backward, "layer_norm_backward", x, x_dtype, dy, dy_dtype, rows, cols, mean, rstd, weight, dx,
                                dx_dtype, dweight, dbias);
}
void conv2d(const Conv2dDesc& d, const void* x, const void* weight, const void* bias, void* y) {
  call(&Backend::conv2d, "conv2d", d, x, weight, bias, y);
}
void conv2d_backward_data(const Conv2dDesc& d, const void* dy, const void* weight, void* dx) {
  call(&Backend::conv2d_backward_data, "conv2d_backward_data", d, dy, weight, dx);
}
void conv2d_backward_weights(const Conv2dDesc& d, const void* x, const void* dy, void* dweight,
                             void* dbias) {
  call(&Backend::conv2d_backward_weights, "conv2d_backward_weights", d, x, dy, dweight, dbias);
}
void max_pool2d(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax) {
  call(&Backend::max_pool2d, "max_pool2d", d, x, y, argmax);
}
void max_pool2d_backward(const Pool2dDesc& d, const void* dy, const std::int32_t* argmax,
                         void* dx) {
  call(&Backend::max_pool2d_backward, "max_pool2d_backward", d, dy, argmax, dx);
}
void avg_pool2d(const Pool2dDesc& d, const void* x, void* y) { call(&Backend::avg_pool2d, "avg_pool2d", d, x, y); }
void avg_pool2d_backward(const Pool2dDesc& d, const void* dy, void* dx) {
  call(&Backend::avg_pool2d_backward, "avg_pool2d_backward", d, dy, dx);
}
void global_avg_pool2d(const void* x, DType dtype, std::int64_t planes, std::int64_t hw, void* y) {
  call(&Backend::global_avg_pool2d, "global_avg_pool2d", x, dtype, planes, hw, y);
}
void global_avg_pool2d_backward(const void* dy, DType dtype, std::int64_t planes,
                                std::int64_t hw, void* dx) {
  call(&Backend::global_avg_pool2d_backward, "global_avg_pool2d_backward", dy, dtype, planes, hw, dx);
}
void matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c) {
  call(&Backend::matmul, "matmul", desc, a, b, bias, c);
}
void sgd_update(const OptimArrays& a, const SgdScalars& s, std::size_t n, std::uint64_t rng_stream) {
  call(&Backend::sgd_update, "sgd_update", a, s, n, rng_stream);
}
void adam_update(const OptimArrays& a, const AdamScalars& s, std::size_t n,
                 std::uint64_t rng_stream) {
  call(&Backend::adam_update, "adam_update", a, s, n, rng_stream);
}
void ema_update(const void* param, DType param_dtype, float* shadow, std::int64_t n, float a) {
  call(&Backend::ema_update, "ema_update", param, param_dtype, shadow, n, a);
}
void unscale(void* data, int dtype, std::size_t n, float inv, float* found_inf, float* amax) {
  MIXPREC_ASSERT(found_inf != nullptr);
  call(&Backend::unscale, "unscale", data, dtype, n, inv, found_inf, amax);
}
bool unscale_inplace(void* data, int dtype, std::size_t n, float inv, float* amax) {
  float found = 0.0f;
  unscale(data, dtype, n, inv, &found, amax);
  return found != 0.0f;
}
// attention.h
void attention_forward(const AttentionDesc& desc, const void* q, const void* k, const void* v,
                       void* out, float* lse) {
  call(&Backend::attention_forward, "attention_forward", desc, q, k, v, out, lse);
}
void attention_backward(const AttentionDesc& desc, const void* q, const void* k, const void* v,
                        const void* out, const float* lse, const void* dout, void* dq, void* dk,
                        void* dv) {
  call(&Backend::attention_backward, "attention_backward", desc, q, k, v, out, lse, dout, dq,
       dk, dv);
}

// embedding.h (transformer ops: embedding lookup)
void embedding(const void* weight, DType dtype, std::int64_t rows, std::int64_t cols,
               const std::int64_t* indices, std::int64_t n, void* out) {
  call(&Backend::embedding, "embedding", weight, dtype, rows, cols, indices, n, out);
}
void embedding_backward(const void* dy, DType dy_dtype, const std::int64_t* indices,
                        std::int64_t n, std::int64_t rows, std::int64_t cols,
                        std::int64_t padding_idx, void* dweight, DType dweight_dtype) {
  call(&Backend::embedding_backward, "embedding_backward", dy, dy_dtype, indices, n, rows, cols,
       padding_idx, dweight, dweight_dtype);
}
void indices_from_values(const void* values, DType dtype, std::int64_t n, std::int64_t* out) {
  call(&Backend::indices_from_values, "indices_from_values", values, dtype, n, out);
}
// masked_fill.h (transformer ops: attention masks)
void masked_fill(std::span<const std::int64_t> shape, const void* x, DType dtype,
                 const StridedInput& mask, float value, void* out) {
  call(&Backend::masked_fill, "masked_fill", shape, x, dtype, mask, value, out);
}
void where(std::int64_t n, const void* cond, DType cond_dtype, const void* a, const void* b,
           DType dtype, void* out) {
  call(&Backend::where, "where", n, cond, cond_dtype, a, b, dtype, out);
}
// random.h (Philox streams)
void random_bits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n) {
  call(&Backend::random_bits, "random_bits", seed, offset, out, n);
}
void random_uniform(void* out, DType dtype, std::int64_t n, std::uint64_t seed,
                    std::uint64_t offset, float low, float high) {
  call(&Backend::random_uniform, "random_uniform", out, dtype, n, seed, offset, low, high);
}
// scan.h (running sums)
void cumsum(const void* in, DType in_dtype, std::int64_t rows, std::int64_t cols, void* out,
            DType out_dtype, bool reverse) {
  call(&Backend::cumsum, "cumsum", in, in_dtype, rows, cols, out, out_dtype, reverse);
}

}  // namespace mixprec::kernels
