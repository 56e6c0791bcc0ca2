// The CUDA batch norm and layer norm kernels. Sums accumulate in double as in the reference
// (kernels/ref/norm_ref.cpp), each in a fixed tree (group_reduce.cuh), so results are
// deterministic and match the reference's sequential double sums once rounded to f32 (to the
// last bit almost always). Every per-channel and per-element formula is the reference's own
// (kernels/spec/norm_math.h: norm_invstd, batch_norm_grad_coefs and the element formulas).
//
// Launch shapes:
//   - batch-norm reductions (statistics, gradient sums): one block per channel over its M = n*s
//     values, which are n runs of s contiguous values;
//   - batch-norm element passes: a 2-D grid, channels along x and chunks of the channel's values
//     along y, the channel's coefficients computed once per block;
//   - layer-norm rows: a warp per row up to 1024 values, else a block;
//   - layer-norm dweight/dbias (sums down the columns): 32 neighbouring columns per block with 8
//     threads each, over chunks of rows along y, the chunks' partials then added in chunk order
//     by a second pass.
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/group_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/norm.h"
#include "kernels/spec/norm_math.h"

namespace mixprec::kernels::cuda {
namespace {

using Block = Group<kThreads>;

/// Element m (m < n*s) of channel c in the contiguous [n, c, s] layout.
__device__ inline std::int64_t channel_index(BatchNormDims d, std::int64_t c, std::int64_t m) {
  return ((m / d.s) * d.c + c) * d.s + m % d.s;
}

/// Blocks along x for the channels (the kernels loop over the rest).
inline unsigned channel_blocks(std::int64_t channels) {
  return static_cast<unsigned>(channels < 65535 ? channels : 65535);
}

/// Chunks of a channel's m values along y for the element passes: about 4 values per thread.
inline unsigned element_chunks(std::int64_t m) {
  const std::int64_t chunks = (m + 4 * kThreads - 1) / (4 * kThreads);
  return static_cast<unsigned>(chunks < 1 ? 1 : (chunks > 1024 ? 1024 : chunks));
}

// ---- batch norm ----

/// Channel c's sum and the sum of squared deviations from center(sum), both in double over
/// the block's fixed-order trees (every thread of the block gets them): the two passes of the
/// statistics, written once for the forward's f32 mean and the split statistics' double one.
template <class Center>
__device__ void channel_sums(const void* x, DType tx, BatchNormDims d, std::int64_t c,
                             Center center, double& sum, double& sq) {
  const std::int64_t values = d.n * d.s;
  sum = 0.0;
  for (std::int64_t m = threadIdx.x; m < values; m += kThreads) {
    sum += load(x, tx, channel_index(d, c, m));
  }
  sum = Block::all_reduce(sum, Add{});
  const double mean = center(sum);
  sq = 0.0;
  for (std::int64_t m = threadIdx.x; m < values; m += kThreads) {
    const double dev = static_cast<double>(load(x, tx, channel_index(d, c, m))) - mean;
    sq += dev * dev;
  }
  sq = Block::all_reduce(sq, Add{});
}

/// Training statistics in f32, as batch_norm_forward writes them: the mean rounded to f32, then
/// the mean squared deviation from that f32 mean.
__global__ void batch_norm_train_stats_kernel(const void* x, DType tx, BatchNormDims d,
                                              double count, float* mean, float* var) {
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    double sum = 0.0, sq = 0.0;
    channel_sums(x, tx, d, c, [count](double s) { return double{static_cast<float>(s / count)}; },
                 sum, sq);
    const float mf = static_cast<float>(sum / count);
    if (threadIdx.x == 0) {
      mean[c] = mf;
      var[c] = static_cast<float>(sq / count);
    }
  }
}

/// The moments of batch_norm_stats, in double: mean = sum / M (0 for M = 0) and m2 = the sum of
/// squared deviations from it.
__global__ void batch_norm_moments_kernel(const void* x, DType tx, BatchNormDims d, double count,
                                          double* mean, double* m2) {
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    double sum = 0.0, sq = 0.0;
    channel_sums(x, tx, d, c, [count](double s) { return count > 0 ? s / count : 0.0; }, sum, sq);
    const double mu = count > 0 ? sum / count : 0.0;
    if (threadIdx.x == 0) {
      mean[c] = mu;
      m2[c] = sq;
    }
  }
}

/// y = batch_norm_apply(x) with the channel's mean and var (device arrays), then the fused
/// epilogue (residual add, ReLU) when asked.
__global__ void batch_norm_apply_kernel(const void* x, DType tx, BatchNormDims d,
                                        const float* mean, const float* var, const float* weight,
                                        const float* bias, float eps, void* y, DType ty,
                                        const void* residual, bool relu) {
  const std::int64_t values = d.n * d.s;
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    const float mu = mean[c];
    const float invstd = norm_invstd(var[c], eps);
    const float w = weight != nullptr ? weight[c] : 1.0f;
    const float b = bias != nullptr ? bias[c] : 0.0f;
    for (std::int64_t m = std::int64_t{blockIdx.y} * kThreads + threadIdx.x; m < values;
         m += std::int64_t{gridDim.y} * kThreads) {
      const std::int64_t i = channel_index(d, c, m);
      const float z = norm_math::batch_norm_apply(load(x, tx, i), mu, invstd, w, b);
      const float r = residual != nullptr ? load(residual, ty, i) : 0.0f;
      store(y, ty, i,
            norm_math::batch_norm_epilogue(z, [ty](float u) { return round_to(ty, u); },
                                           residual != nullptr, r, relu));
    }
  }
}

/// The gradient batch norm receives at element i: dy, or dy through the fused ReLU (relu's
/// rule on the forward's output y, stored in dy's dtype).
__device__ inline float epilogue_grad(const void* dy, const void* relu_y, DType tdy,
                                      std::int64_t i) {
  const float g = load(dy, tdy, i);
  return relu_y != nullptr ? norm_math::batch_norm_relu_grad(load(relu_y, tdy, i), g) : g;
}

/// Per-channel sum(dy) and sum(dy * (x - mean)) in double; each output may be null. dweight
/// and dbias (batch_norm_backward's) come from the same sums, with var and eps.
__global__ void batch_norm_grad_sums_kernel(const void* x, DType tx, const void* dy, DType tdy,
                                            BatchNormDims d, const float* mean, double* sum_dy,
                                            double* sum_dy_xmu, const float* var, float eps,
                                            float* dweight, float* dbias, const void* relu_y,
                                            void* dresidual) {
  const std::int64_t values = d.n * d.s;
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    const float mu = mean[c];
    DoublePair s{0.0, 0.0};
    for (std::int64_t m = threadIdx.x; m < values; m += kThreads) {
      const std::int64_t i = channel_index(d, c, m);
      const float gf = epilogue_grad(dy, relu_y, tdy, i);
      if (dresidual != nullptr) store(dresidual, tdy, i, gf);  // exact: dy's value or 0
      const double g = gf;
      s.a += g;
      s.b += g * (static_cast<double>(load(x, tx, i)) - mu);
    }
    s = Block::all_reduce(s, Add{});
    if (threadIdx.x == 0) {
      if (sum_dy != nullptr) sum_dy[c] = s.a;
      if (sum_dy_xmu != nullptr) sum_dy_xmu[c] = s.b;
      if (dweight != nullptr) dweight[c] = static_cast<float>(s.b) * norm_invstd(var[c], eps);
      if (dbias != nullptr) dbias[c] = static_cast<float>(s.a);
    }
  }
}

/// dx = batch_norm_grad_apply(dy, x - mean, batch_norm_grad_coefs(the channel's sums)).
__global__ void batch_norm_grad_apply_kernel(const void* x, DType tx, const void* dy, DType tdy,
                                             BatchNormDims d, const float* mean,
                                             const float* var, float eps, const float* weight,
                                             const double* sum_dy, const double* sum_dy_xmu,
                                             double count, bool training, void* dx, DType tdx,
                                             const void* relu_y) {
  const std::int64_t values = d.n * d.s;
  for (std::int64_t c = blockIdx.x; c < d.c; c += gridDim.x) {
    const float mu = mean[c];
    const BatchNormGradCoefs k =
        batch_norm_grad_coefs(var[c], eps, weight != nullptr ? weight[c] : 1.0f, sum_dy[c],
                              sum_dy_xmu[c], count, training);
    for (std::int64_t m = std::int64_t{blockIdx.y} * kThreads + threadIdx.x; m < values;
         m += std::int64_t{gridDim.y} * kThreads) {
      const std::int64_t i = channel_index(d, c, m);
      const float xmu = load(x, tx, i) - mu;
      store(dx, tdx, i, norm_math::batch_norm_grad_apply(epilogue_grad(dy, relu_y, tdy, i), xmu, k));
    }
  }
}

// ---- layer norm ----

/// The rows' layer norm. With delta set, the row is first the residual sum x + delta, rounded
/// to ts and stored in `sum` by the pass that sums it; the later passes read it back from there
/// (each lane its own elements, so no barrier is needed): add_layer_norm_forward.
template <int G>
__global__ void layer_norm_forward_kernel(const void* x, DType tx, const void* delta, DType td,
                                          void* sum_out, DType ts, std::int64_t rows,
                                          std::int64_t cols, const float* weight,
                                          const float* bias, float eps, void* y, DType ty,
                                          float* mean, float* rstd) {
  using Grp = Group<G>;
  const void* src = delta != nullptr ? sum_out : x;
  const DType tsrc = delta != nullptr ? ts : tx;
  for (std::int64_t r = Grp::first_item(); r < rows; r += Grp::item_stride()) {
    const std::int64_t base = r * cols;
    double sum = 0.0;
    for (std::int64_t j = Grp::lane(); j < cols; j += G) {
      if (delta != nullptr) {
        const float v = round_to(ts, load(x, tx, base + j) + load(delta, td, base + j));
        store(sum_out, ts, base + j, v);
        sum += v;
      } else {
        sum += load(x, tx, base + j);
      }
    }
    sum = Grp::all_reduce(sum, Add{});
    const float m = cols > 0 ? static_cast<float>(sum / static_cast<double>(cols)) : 0.0f;
    double sq = 0.0;
    for (std::int64_t j = Grp::lane(); j < cols; j += G) {
      const double dev = static_cast<double>(load(src, tsrc, base + j)) - m;
      sq += dev * dev;
    }
    sq = Grp::all_reduce(sq, Add{});
    const float v = cols > 0 ? static_cast<float>(sq / static_cast<double>(cols)) : 0.0f;
    const float rs = norm_invstd(v, eps);
    if (Grp::lane() == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    for (std::int64_t j = Grp::lane(); j < cols; j += G) {
      const float xhat = norm_math::layer_norm_xhat(load(src, tsrc, base + j), m, rs);
      const float w = weight != nullptr ? weight[j] : 1.0f;
      const float b = bias != nullptr ? bias[j] : 0.0f;
      store(y, ty, base + j, norm_math::layer_norm_apply(xhat, w, b));
    }
  }
}

template <int G>
__global__ void layer_norm_dx_kernel(const void* x, DType tx, const void* dy, DType tdy,
                                     std::int64_t rows, std::int64_t cols, const float* mean,
                                     const float* rstd, const float* weight, void* dx,
                                     DType tdx) {
  using Grp = Group<G>;
  for (std::int64_t r = Grp::first_item(); r < rows; r += Grp::item_stride()) {
    const std::int64_t base = r * cols;
    const float mr = mean[r];
    const float rr = rstd[r];
    DoublePair s{0.0, 0.0};  // sum(g), sum(g * xhat)
    for (std::int64_t j = Grp::lane(); j < cols; j += G) {
      const double g = static_cast<double>(load(dy, tdy, base + j)) *
                       (weight != nullptr ? weight[j] : 1.0f);
      s.a += g;
      s.b += g * norm_math::layer_norm_xhat(load(x, tx, base + j), mr, rr);
    }
    s = Grp::all_reduce(s, Add{});
    const float a = static_cast<float>(s.a / static_cast<double>(cols));
    const float b = static_cast<float>(s.b / static_cast<double>(cols));
    for (std::int64_t j = Grp::lane(); j < cols; j += G) {
      const float g = load(dy, tdy, base + j) * (weight != nullptr ? weight[j] : 1.0f);
      const float xhat = norm_math::layer_norm_xhat(load(x, tx, base + j), mr, rr);
      store(dx, tdx, base + j, norm_math::layer_norm_grad_apply(rr, g, a, xhat, b));
    }
  }
}

constexpr int kParamColumns = 32;                      // columns per block (threadIdx.x)
constexpr int kParamLanes = kThreads / kParamColumns;  // threads per column (threadIdx.y)
constexpr std::int64_t kRowsPerChunk = 256;            // rows per chunk (blockIdx.y)
constexpr std::int64_t kMaxChunks = 64;

/// Chunk blockIdx.y's partial sum(dy) and sum(dy * xhat) of column j = 32 * blockIdx.x +
/// threadIdx.x, its rows taken by the 8 threads of the column in turn, their partials then
/// added in threadIdx.y order: partial[blockIdx.y * cols + j].
__global__ void layer_norm_param_partials_kernel(const void* x, DType tx, const void* dy,
                                                 DType tdy, std::int64_t rows, std::int64_t cols,
                                                 const float* mean, const float* rstd,
                                                 std::int64_t rows_per_chunk,
                                                 DoublePair* partial) {
  __shared__ DoublePair lanes[kParamLanes][kParamColumns];
  const std::int64_t r0 = std::int64_t{blockIdx.y} * rows_per_chunk;
  const std::int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  for (std::int64_t j0 = std::int64_t{blockIdx.x} * kParamColumns; j0 < cols;
       j0 += std::int64_t{gridDim.x} * kParamColumns) {
    const std::int64_t j = j0 + threadIdx.x;
    DoublePair s{0.0, 0.0};  // sum(dy), sum(dy * xhat)
    if (j < cols) {
      for (std::int64_t r = r0 + threadIdx.y; r < r1; r += kParamLanes) {
        const double g = load(dy, tdy, r * cols + j);
        s.a += g;
        s.b += g * norm_math::layer_norm_xhat(load(x, tx, r * cols + j), mean[r], rstd[r]);
      }
    }
    lanes[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < cols) {
      for (int l = 1; l < kParamLanes; ++l) s = s + lanes[l][threadIdx.x];
      partial[std::int64_t{blockIdx.y} * cols + j] = s;
    }
    __syncthreads();  // lanes is written again by the next columns
  }
}

/// dweight[j], dbias[j]: column j's chunk partials added in chunk order.
__global__ void layer_norm_param_finish_kernel(const DoublePair* partial, std::int64_t chunks,
                                               std::int64_t cols, float* dweight, float* dbias) {
  MIXPREC_GRID_STRIDE(j, cols) {
    DoublePair s = partial[j];
    for (std::int64_t k = 1; k < chunks; ++k) s = s + partial[k * cols + j];
    if (dweight != nullptr) dweight[j] = static_cast<float>(s.b);
    if (dbias != nullptr) dbias[j] = static_cast<float>(s.a);
  }
}

/// Rows of up to 1024 values: a warp each; longer: a block each.
bool warp_rows(std::int64_t cols) { return cols <= 1024; }

/// Launches layer_norm_forward_kernel (delta null: a plain layer norm).
void launch_layer_norm_forward(const char* op, const void* x, DType tx, const void* delta,
                               DType td, void* sum, DType ts, std::int64_t rows,
                               std::int64_t cols, const float* weight, const float* bias,
                               float eps, void* y, DType ty, float* mean, float* rstd) {
  detail::check_layer_norm_args(op, rows, cols, eps);
  if (rows == 0) return;  // cols == 0 still writes each row's mean and rstd
  if (warp_rows(cols)) {
    layer_norm_forward_kernel<kWarp><<<group_grid<kWarp>(rows), kThreads, 0, stream()>>>(
        x, tx, delta, td, sum, ts, rows, cols, weight, bias, eps, y, ty, mean, rstd);
  } else {
    layer_norm_forward_kernel<kThreads><<<group_grid<kThreads>(rows), kThreads, 0, stream()>>>(
        x, tx, delta, td, sum, ts, rows, cols, weight, bias, eps, y, ty, mean, rstd);
  }
  check_launch(op);
}

}  // namespace

void batch_norm_forward(const void* x, DType x_dtype, BatchNormDims d, const float* weight,
                        const float* bias, float eps, bool training, float* mean, float* var,
                        void* y, DType y_dtype, const void* residual, bool relu) {
  const char* op = "batch_norm";
  detail::check_batch_norm_args(op, d, eps, training);
  if (d.c == 0) return;
  const std::int64_t values = d.n * d.s;
  if (training) {
    batch_norm_train_stats_kernel<<<channel_blocks(d.c), kThreads, 0, stream()>>>(
        x, x_dtype, d, static_cast<double>(values), mean, var);
    check_launch(op);
  }
  if (values == 0) return;
  const dim3 g(channel_blocks(d.c), element_chunks(values));
  batch_norm_apply_kernel<<<g, kThreads, 0, stream()>>>(x, x_dtype, d, mean, var, weight, bias,
                                                        eps, y, y_dtype, residual, relu);
  check_launch(op);
}

void batch_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         BatchNormDims d, const float* mean, const float* var, float eps,
                         const float* weight, bool training, void* dx, DType dx_dtype,
                         float* dweight, float* dbias, const void* relu_y, void* dresidual) {
  const char* op = "batch_norm_backward";
  detail::check_batch_norm_args(op, d, eps, training);
  if (d.c == 0 ||
      (dx == nullptr && dweight == nullptr && dbias == nullptr && dresidual == nullptr)) {
    return;
  }
  const std::int64_t values = d.n * d.s;
  const bool want_dx = dx != nullptr && values > 0;
  const auto channels = static_cast<std::size_t>(d.c);
  Scratch sums(want_dx ? 2 * channels * sizeof(double) : 0);
  double* sum_dy = want_dx ? sums.as<double>() : nullptr;
  double* sum_dy_xmu = want_dx ? sums.as<double>() + channels : nullptr;
  batch_norm_grad_sums_kernel<<<channel_blocks(d.c), kThreads, 0, stream()>>>(
      x, x_dtype, dy, dy_dtype, d, mean, sum_dy, sum_dy_xmu, var, eps, dweight, dbias, relu_y,
      dresidual);
  check_launch(op);
  if (!want_dx) return;
  const dim3 g(channel_blocks(d.c), element_chunks(values));
  batch_norm_grad_apply_kernel<<<g, kThreads, 0, stream()>>>(
      x, x_dtype, dy, dy_dtype, d, mean, var, eps, weight, sum_dy, sum_dy_xmu,
      static_cast<double>(values), training, dx, dx_dtype, relu_y);
  check_launch(op);
}

void batch_norm_stats(const void* x, DType x_dtype, BatchNormDims d, double* mean, double* m2) {
  const char* op = "batch_norm_stats";
  detail::check_batch_norm_args(op, d, 0.0f, false);
  if (d.c == 0) return;
  batch_norm_moments_kernel<<<channel_blocks(d.c), kThreads, 0, stream()>>>(
      x, x_dtype, d, static_cast<double>(d.n * d.s), mean, m2);
  check_launch(op);
}

void batch_norm_backward_reduce(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                                BatchNormDims d, const float* mean, double* sum_dy,
                                double* sum_dy_xmu) {
  const char* op = "batch_norm_backward_reduce";
  detail::check_batch_norm_args(op, d, 0.0f, false);
  if (d.c == 0) return;
  batch_norm_grad_sums_kernel<<<channel_blocks(d.c), kThreads, 0, stream()>>>(
      x, x_dtype, dy, dy_dtype, d, mean, sum_dy, sum_dy_xmu, nullptr, 0.0f, nullptr, nullptr,
      nullptr, nullptr);
  check_launch(op);
}

void batch_norm_backward_elemt(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                               BatchNormDims d, const float* mean, const float* var, float eps,
                               const float* weight, const double* sum_dy,
                               const double* sum_dy_xmu, double count, void* dx, DType dx_dtype) {
  const char* op = "batch_norm_backward_elemt";
  detail::check_batch_norm_args(op, d, eps, false);
  const std::int64_t values = d.n * d.s;
  if (d.c == 0 || values == 0) return;
  const dim3 g(channel_blocks(d.c), element_chunks(values));
  batch_norm_grad_apply_kernel<<<g, kThreads, 0, stream()>>>(x, x_dtype, dy, dy_dtype, d, mean,
                                                             var, eps, weight, sum_dy,
                                                             sum_dy_xmu, count, true, dx,
                                                             dx_dtype, nullptr);
  check_launch(op);
}

void layer_norm_forward(const void* x, DType x_dtype, std::int64_t rows, std::int64_t cols,
                        const float* weight, const float* bias, float eps, void* y,
                        DType y_dtype, float* mean, float* rstd) {
  launch_layer_norm_forward("layer_norm", x, x_dtype, nullptr, x_dtype, nullptr, x_dtype, rows,
                            cols, weight, bias, eps, y, y_dtype, mean, rstd);
}

void add_layer_norm_forward(const void* x, DType x_dtype, const void* delta, DType delta_dtype,
                            std::int64_t rows, std::int64_t cols, const float* weight,
                            const float* bias, float eps, void* sum, DType sum_dtype, void* y,
                            DType y_dtype, float* mean, float* rstd) {
  launch_layer_norm_forward("add_layer_norm", x, x_dtype, delta, delta_dtype, sum, sum_dtype,
                            rows, cols, weight, bias, eps, y, y_dtype, mean, rstd);
}

void layer_norm_backward(const void* x, DType x_dtype, const void* dy, DType dy_dtype,
                         std::int64_t rows, std::int64_t cols, const float* mean,
                         const float* rstd, const float* weight, void* dx, DType dx_dtype,
                         float* dweight, float* dbias) {
  const char* op = "layer_norm_backward";
  detail::check_layer_norm_args(op, rows, cols, 0.0f);
  if (dx != nullptr && rows > 0 && cols > 0) {
    if (warp_rows(cols)) {
      layer_norm_dx_kernel<kWarp><<<group_grid<kWarp>(rows), kThreads, 0, stream()>>>(
          x, x_dtype, dy, dy_dtype, rows, cols, mean, rstd, weight, dx, dx_dtype);
    } else {
      layer_norm_dx_kernel<kThreads><<<group_grid<kThreads>(rows), kThreads, 0, stream()>>>(
          x, x_dtype, dy, dy_dtype, rows, cols, mean, rstd, weight, dx, dx_dtype);
    }
    check_launch(op);
  }
  if ((dweight == nullptr && dbias == nullptr) || cols == 0) return;
  // rows == 0 still writes zeros: one chunk with no rows.
  std::int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  chunks = chunks < 1 ? 1 : (chunks > kMaxChunks ? kMaxChunks : chunks);
  const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  Scratch partial(static_cast<std::size_t>(chunks * cols) * sizeof(DoublePair));
  const std::int64_t column_blocks = (cols + kParamColumns - 1) / kParamColumns;
  const dim3 g(static_cast<unsigned>(column_blocks < 65535 ? column_blocks : 65535),
               static_cast<unsigned>(chunks));
  layer_norm_param_partials_kernel<<<g, dim3(kParamColumns, kParamLanes), 0, stream()>>>(
      x, x_dtype, dy, dy_dtype, rows, cols, mean, rstd, rows_per_chunk,
      partial.as<DoublePair>());
  check_launch(op);
  layer_norm_param_finish_kernel<<<grid(cols), kThreads, 0, stream()>>>(
      partial.as<DoublePair>(), chunks, cols, dweight, dbias);
  check_launch(op);
}

}  // namespace mixprec::kernels::cuda
