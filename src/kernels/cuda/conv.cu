// The CUDA convolutions. Each entry first offers the call to cuDNN (conv_cudnn.h; the choice is
// conv_path.h's, MIXPREC_CUDA_CONV), which is loaded at run time where it is installed and reads
// NCHW or channels-last in place. What cuDNN refuses or fails runs here: im2col / col2im kernels
// around GEMMs through the backend's own matmul (cuBLASLt), which needs nothing beyond the CUDA
// toolkit. The column matrix (conv_columns.h) holds the input's own elements (a copy, exact), the
// GEMMs take them in the input dtype with f32 accumulation into f32 results, and each output is
// rounded once, as the reference rounds its f32 sums once. The batch runs in chunks of columns so
// the scratch stays near kColumnBudget; chunks run in a fixed order on one stream and every sum
// (GEMM, col2im, bias gradient) has a fixed order, so the results are deterministic. They differ
// from the reference's only in summation order.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/conv.h"
#include "kernels/cuda/conv_columns.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/cuda/conv_path.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/group_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/matmul.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels::cuda {
namespace {

/// Scratch bytes a chunk may take (column matrix and GEMM result); a chunk never holds less
/// than one column (one sample for backward data), which may take more.
constexpr std::size_t kColumnBudget = std::size_t{64} << 20;

/// How many of `total` units of `bytes_each` scratch bytes fit kColumnBudget; at least one.
std::int64_t chunk_units(std::int64_t total, std::size_t bytes_each) {
  const auto fit = static_cast<std::int64_t>(kColumnBudget / std::max<std::size_t>(bytes_each, 1));
  return std::max<std::int64_t>(1, std::min(total, fit));
}

ConvGeometry geometry(const Conv2dDesc& d) {
  return {d.c, d.h, d.w, d.o, d.kh, d.kw, d.stride, d.padding, d.out_h(), d.out_w()};
}

std::size_t bytes(std::int64_t count, std::size_t element) {
  return static_cast<std::size_t>(count) * element;
}

void zero(void* p, std::size_t n, const char* op) {
  if (n == 0) return;
  check_cuda(cudaMemsetAsync(p, 0, n, stream()), op, "cudaMemsetAsync");  // +0 in every dtype
}

// Element copies move raw bits (Word: the dtype's width): the column matrix is the input
// exactly, NaN payloads included.
template <class Word>
__global__ void im2col_kernel(ConvGeometry g, std::int64_t j0, std::int64_t cols, const Word* x,
                              Word* col) {
  MIXPREC_GRID_STRIDE(i, g.taps() * cols) {
    const std::int64_t src = im2col_source(g, i / cols, j0 + i % cols);
    col[i] = src < 0 ? Word{0} : x[src];
  }
}

// dy's columns j0 .. j0 + cols as an [o, cols] matrix, the GEMMs' operand.
template <class Word>
__global__ void gather_dy_kernel(ConvGeometry g, std::int64_t j0, std::int64_t cols,
                                 const Word* dy, Word* dy_cols) {
  MIXPREC_GRID_STRIDE(i, g.o * cols) dy_cols[i] = dy[output_index(g, i / cols, j0 + i % cols)];
}

template <class Fn>
void for_word(DType t, Fn&& fn) {
  if (t == DType::f32) {
    fn(std::uint32_t{});
  } else {
    fn(std::uint16_t{});
  }
}

void im2col(const ConvGeometry& g, std::int64_t j0, std::int64_t cols, const void* x,
            DType dtype, void* col, const char* op) {
  for_word(dtype, [&](auto word) {
    using Word = decltype(word);
    im2col_kernel<<<grid(g.taps() * cols), kThreads, 0, stream()>>>(
        g, j0, cols, static_cast<const Word*>(x), static_cast<Word*>(col));
  });
  check_launch(op);
}

void gather_dy(const ConvGeometry& g, std::int64_t j0, std::int64_t cols, const void* dy,
               DType dtype, void* dy_cols, const char* op) {
  for_word(dtype, [&](auto word) {
    using Word = decltype(word);
    gather_dy_kernel<<<grid(g.o * cols), kThreads, 0, stream()>>>(
        g, j0, cols, static_cast<const Word*>(dy), static_cast<Word*>(dy_cols));
  });
  check_launch(op);
}

/// c [m, n] (f32) = [c +] op(a) * op(b), a and b in `dtype`, through the backend's matmul;
/// f32 products on TF32 Tensor Cores when `tf32` (Conv2dDesc::tf32).
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, bool trans_a, bool trans_b,
          DType dtype, const void* a, const void* b, float* c, bool accumulate, bool tf32) {
  MatmulDesc md;
  md.m = m, md.n = n, md.k = k;
  md.trans_a = trans_a, md.trans_b = trans_b;
  md.dtype = dtype;
  md.c_dtype = DType::f32;
  md.accumulate = accumulate;
  md.tf32 = tf32 && dtype == DType::f32;
  matmul(md, a, b, nullptr, c);
}

// y = acc + bias, rounded once, as the reference's T(acc + b) (b = 0 without a bias, so a -0
// sum becomes +0 there too).
__global__ void bias_round_kernel(ConvGeometry g, std::int64_t j0, std::int64_t cols,
                                  const float* acc, const void* bias, DType bias_dtype,
                                  bool has_bias, void* y, DType dtype) {
  MIXPREC_GRID_STRIDE(i, g.o * cols) {
    const std::int64_t o = i / cols;
    const float b = has_bias ? load(bias, bias_dtype, o) : 0.0f;
    store(y, dtype, output_index(g, o, j0 + i % cols), acc[i] + b);
  }
}

// dx of `samples` samples from s0 on, each element one gather over its column gradient.
__global__ void col2im_kernel(ConvGeometry g, std::int64_t s0, std::int64_t samples,
                              const float* dcol, void* dx, DType dtype) {
  const std::int64_t cols = samples * g.pixels();
  MIXPREC_GRID_STRIDE(i, samples * g.c * g.h * g.w) {
    const std::int64_t ix = i % g.w, iy = i / g.w % g.h, c = i / (g.w * g.h) % g.c;
    const std::int64_t s = i / (g.w * g.h * g.c);
    const float v = col2im_sum(g, s, c, iy, ix,
                               [&](std::int64_t r, std::int64_t j) { return dcol[r * cols + j]; });
    store(dx, dtype, s0 * g.c * g.h * g.w + i, v);
  }
}

__global__ void round_kernel(std::int64_t n, const float* src, void* dst, DType dtype) {
  MIXPREC_GRID_STRIDE(i, n) store(dst, dtype, i, src[i]);
}

// dbias[o] = the sum of dy (NCHW or channels-last) over samples and pixels: one block per
// output channel, each thread a fixed strided subset, then the block's fixed tree
// (group_reduce.cuh). The bias gradient of both paths (cuDNN's wgrad graph has none): one f32
// sum per channel, rounded once.
__global__ void bias_grad_kernel(ConvGeometry g, std::int64_t n, bool channels_last,
                                 const void* dy, DType dtype, void* dbias, DType bias_dtype) {
  const std::int64_t per_channel = n * g.pixels();
  for (std::int64_t o = blockIdx.x; o < g.o; o += gridDim.x) {
    float sum = 0.0f;
    for (std::int64_t t = threadIdx.x; t < per_channel; t += blockDim.x) {
      // t = sample * pixels + pixel
      sum += load(dy, dtype,
                  channels_last ? t * g.o + o
                                : (t / g.pixels() * g.o + o) * g.pixels() + t % g.pixels());
    }
    sum = block_all_reduce(sum, Add{});
    if (threadIdx.x == 0) store(dbias, bias_dtype, o, sum);
  }
}

// Channels-last operands run the NCHW kernels on transposed copies through the backend's copy
// kernel (exact: elements move, nothing is computed), so the im2col indexing stays NCHW only.
// An NHWC path of its own (cuDNN's, issue 36) is what removes the two copies.
class Nchw {
 public:
  // A scratch NCHW image of [n, c, h, w] in dtype t.
  Nchw(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, DType t)
      : shape_{n, c, h, w}, dtype_(t), buf_(bytes(n * c * h * w, size_of(t)), "conv2d") {}
  void* data() const { return buf_.as<void>(); }
  // Fills the scratch from a channels-last image of the same extents.
  const void* from_channels_last(const void* src) {
    copy(shape_, {src, dtype_, nhwc_strides()}, {data(), dtype_, nchw_strides()});
    return data();
  }
  // Writes the scratch to a channels-last image of the same extents.
  void to_channels_last(void* dst) const {
    copy(shape_, {data(), dtype_, nchw_strides()}, {dst, dtype_, nhwc_strides()});
  }

 private:
  std::array<std::int64_t, 4> nchw_strides() const {
    return {shape_[1] * shape_[2] * shape_[3], shape_[2] * shape_[3], shape_[3], 1};
  }
  std::array<std::int64_t, 4> nhwc_strides() const {
    return {shape_[1] * shape_[2] * shape_[3], 1, shape_[3] * shape_[1], shape_[1]};
  }
  std::array<std::int64_t, 4> shape_;
  DType dtype_;
  Scratch buf_;
};

Conv2dDesc as_nchw(const Conv2dDesc& d) {
  Conv2dDesc nd = d;
  nd.channels_last = false;
  return nd;
}

/// Offers the call to cuDNN when the path choice gives it d (`run` calls cuDNN, true when it
/// ran); logs, when verbose, the path that runs and why cuDNN did not. False: the im2col path
/// must run. A cuDNN failure (a graph it cannot build or run for this shape) is cached with its
/// plan, so later calls of the shape go straight to im2col with the same reason.
template <class Run>
bool ran_cudnn(const char* op, const Conv2dDesc& d, Run&& run) {
  const bool verbose = verbose_enabled();
  ConvChoice c = choose_conv_path(d, first_conv_path(), verbose);
  if (c.path == ConvPath::cudnn) {
    if (run()) {
      if (verbose) verbose_log(op, name(d.dtype), conv_path_name(ConvPath::cudnn), c.skipped);
      return true;
    }
    if (verbose) c.skipped = std::string("cudnn (failed: ") + cudnn_conv_last_error() + ")";
  }
  if (verbose) {
    std::string path = conv_path_name(ConvPath::im2col);
    if (d.channels_last) path += " (channels-last transposed to NCHW around it)";
    verbose_log(op, name(d.dtype), path, c.skipped);
  }
  return false;
}

void im2col_conv2d(const Conv2dDesc& d, const void* x, const void* weight, const void* bias,
                   void* y) {
  constexpr const char* op = "conv2d";
  if (d.channels_last) {
    Nchw xs(d.n, d.c, d.h, d.w, d.dtype), ys(d.n, d.o, d.out_h(), d.out_w(), d.dtype);
    im2col_conv2d(as_nchw(d), xs.from_channels_last(x), weight, bias, ys.data());
    ys.to_channels_last(y);
    return;
  }
  const ConvGeometry g = geometry(d);
  const std::int64_t columns = d.n * g.pixels();
  if (columns == 0 || d.o == 0) return;
  const std::size_t es = size_of(d.dtype);
  const std::int64_t chunk = chunk_units(columns, bytes(g.taps(), es) + bytes(d.o, sizeof(float)));
  Scratch col(bytes(g.taps() * chunk, es));
  Scratch acc(bytes(d.o * chunk, sizeof(float)));
  for (std::int64_t j0 = 0; j0 < columns; j0 += chunk) {
    const std::int64_t cols = std::min(chunk, columns - j0);
    if (g.taps() > 0) {
      im2col(g, j0, cols, x, d.dtype, col.as<void>(), op);
      gemm(d.o, cols, g.taps(), false, false, d.dtype, weight, col.as<void>(), acc.as<float>(),
           false, d.tf32);
    } else {
      zero(acc.as<void>(), bytes(d.o * cols, sizeof(float)), op);  // no input channels: y = bias
    }
    bias_round_kernel<<<grid(d.o * cols), kThreads, 0, stream()>>>(
        g, j0, cols, acc.as<float>(), bias, d.bias_dtype, d.has_bias, y, d.dtype);
    check_launch(op);
  }
}

void im2col_backward_data(const Conv2dDesc& d, const void* dy, const void* weight, void* dx) {
  constexpr const char* op = "conv2d_backward_data";
  if (d.channels_last) {
    Nchw dys(d.n, d.o, d.out_h(), d.out_w(), d.dtype), dxs(d.n, d.c, d.h, d.w, d.dtype);
    im2col_backward_data(as_nchw(d), dys.from_channels_last(dy), weight, dxs.data());
    dxs.to_channels_last(dx);
    return;
  }
  const ConvGeometry g = geometry(d);
  const std::int64_t sample_size = d.c * d.h * d.w;
  if (d.n * sample_size == 0) return;
  const std::size_t es = size_of(d.dtype);
  if (d.o == 0) {  // no output channel reads x: its gradient is zero
    zero(dx, bytes(d.n * sample_size, es), op);
    return;
  }
  // Whole samples per chunk, so that every dx element's gather finds all its column entries.
  const std::int64_t chunk = chunk_units(
      d.n, bytes(g.pixels(), bytes(d.o, es) + bytes(g.taps(), sizeof(float))));
  Scratch dy_cols(bytes(d.o * chunk * g.pixels(), es));
  Scratch dcol(bytes(g.taps() * chunk * g.pixels(), sizeof(float)));
  for (std::int64_t s0 = 0; s0 < d.n; s0 += chunk) {
    const std::int64_t samples = std::min(chunk, d.n - s0);
    const std::int64_t cols = samples * g.pixels();
    gather_dy(g, s0 * g.pixels(), cols, dy, d.dtype, dy_cols.as<void>(), op);
    // dcol [taps, cols] = weight^T [taps, o] * dy_cols [o, cols]
    gemm(g.taps(), cols, d.o, true, false, d.dtype, weight, dy_cols.as<void>(), dcol.as<float>(),
         false, d.tf32);
    col2im_kernel<<<grid(samples * sample_size), kThreads, 0, stream()>>>(
        g, s0, samples, dcol.as<float>(), dx, d.dtype);
    check_launch(op);
  }
}

void bias_grad(const Conv2dDesc& d, const void* dy, void* dbias, const char* op) {
  bias_grad_kernel<<<static_cast<unsigned>(std::min<std::int64_t>(d.o, 65535)), kThreads, 0,
                     stream()>>>(geometry(d), d.n, d.channels_last, dy, d.dtype, dbias,
                                 d.bias_dtype);
  check_launch(op);
}

void im2col_backward_weights(const Conv2dDesc& d, const void* x, const void* dy, void* dweight,
                             void* dbias) {
  constexpr const char* op = "conv2d_backward_weights";
  if (d.channels_last) {
    Nchw xs(d.n, d.c, d.h, d.w, d.dtype), dys(d.n, d.o, d.out_h(), d.out_w(), d.dtype);
    im2col_backward_weights(as_nchw(d), xs.from_channels_last(x), dys.from_channels_last(dy),
                            dweight, dbias);
    return;
  }
  const ConvGeometry g = geometry(d);
  if (d.o == 0) return;
  const std::size_t es = size_of(d.dtype);
  const std::int64_t columns = d.n * g.pixels();
  if (columns == 0) {  // an empty batch: both gradients are zero sums
    zero(dweight, bytes(d.o * g.taps(), es), op);
    if (dbias != nullptr) zero(dbias, bytes(d.o, size_of(d.bias_dtype)), op);
    return;
  }
  if (dbias != nullptr) bias_grad(d, dy, dbias, op);
  if (g.taps() == 0) return;
  // The weight gradient sums over every chunk in f32 (the GEMM accumulating into C) and is
  // rounded once at the end, as the reference rounds its one f32 sum.
  const bool widened = d.dtype != DType::f32;
  Scratch dw32_buf(widened ? bytes(d.o * g.taps(), sizeof(float)) : 0);
  float* dw32 = widened ? dw32_buf.as<float>() : static_cast<float*>(dweight);
  const std::int64_t chunk = chunk_units(columns, bytes(g.taps() + d.o, es));
  Scratch col(bytes(g.taps() * chunk, es));
  Scratch dy_cols(bytes(d.o * chunk, es));
  for (std::int64_t j0 = 0; j0 < columns; j0 += chunk) {
    const std::int64_t cols = std::min(chunk, columns - j0);
    im2col(g, j0, cols, x, d.dtype, col.as<void>(), op);
    gather_dy(g, j0, cols, dy, d.dtype, dy_cols.as<void>(), op);
    // dw32 [o, taps] (+)= dy_cols [o, cols] * col^T [cols, taps]
    gemm(d.o, g.taps(), cols, false, true, d.dtype, dy_cols.as<void>(), col.as<void>(), dw32,
         j0 > 0, d.tf32);
  }
  if (widened) {
    round_kernel<<<grid(d.o * g.taps()), kThreads, 0, stream()>>>(d.o * g.taps(), dw32, dweight,
                                                                   d.dtype);
    check_launch(op);
  }
}

}  // namespace

void conv2d(const Conv2dDesc& d, const void* x, const void* weight, const void* bias, void* y) {
  validate_conv2d("conv2d", d);
  if (ran_cudnn("conv2d", d, [&] { return cudnn_conv2d(d, x, weight, bias, y); })) return;
  im2col_conv2d(d, x, weight, bias, y);
}

void conv2d_backward_data(const Conv2dDesc& d, const void* dy, const void* weight, void* dx) {
  validate_conv2d("conv2d_backward_data", d);
  if (ran_cudnn("conv2d_backward_data", d,
                [&] { return cudnn_conv2d_backward_data(d, dy, weight, dx); })) {
    return;
  }
  im2col_backward_data(d, dy, weight, dx);
}

void conv2d_backward_weights(const Conv2dDesc& d, const void* x, const void* dy, void* dweight,
                             void* dbias) {
  constexpr const char* op = "conv2d_backward_weights";
  validate_conv2d(op, d);
  if (ran_cudnn(op, d, [&] { return cudnn_conv2d_backward_weights(d, x, dy, dweight); })) {
    // cuDNN accepts no empty tensor, so d has samples and channels here.
    if (dbias != nullptr) bias_grad(d, dy, dbias, op);
    return;
  }
  im2col_backward_weights(d, x, dy, dweight, dbias);
}

}  // namespace mixprec::kernels::cuda
