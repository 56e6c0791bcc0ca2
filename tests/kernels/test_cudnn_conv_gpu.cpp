// cuDNN's convolutions (src/kernels/cuda/conv_cudnn.h) on a GPU against the reference
// (kernels::ref, f32 sums rounded once): forward with and without a bias, backward data and
// backward weights, bf16, f16 and f32 (TF32 off, and once on), NCHW and channels-last, each
// run twice with the same bits (only deterministic engines run). GPU-only: it runs when
// MIXPREC_CONFORMANCE_DEVICE is cuda (scripts/check-cuda.sh runs the Gpu* tests), and there
// cuDNN must load and take every case; elsewhere it skips with that reason. Built only with the
// cuDNN path.
#include <gtest/gtest.h>

#if MIXPREC_TESTS_CUDNN

#include <cstring>
#include <string>

#include "core/cuda_runtime.h"
#include "kernels/conv.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/gpu_test_util.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels::cuda {
namespace {

using gputest::bytes_of;
using gputest::DeviceBytes;
using gputest::expect_close;
using ktest::Buffer;
using ktest::random_buffer;

Conv2dDesc desc(std::int64_t n, std::int64_t c, std::int64_t hw, std::int64_t o, std::int64_t k,
                std::int64_t stride, std::int64_t padding, DType t, bool channels_last) {
  Conv2dDesc d;
  d.n = n, d.c = c, d.h = d.w = hw;
  d.o = o, d.kh = d.kw = k;
  d.stride = stride, d.padding = padding;
  d.dtype = t;
  d.bias_dtype = t;
  d.channels_last = channels_last;
  return d;
}

std::string label(const Conv2dDesc& d) {
  return "n=" + std::to_string(d.n) + " c=" + std::to_string(d.c) + " hw=" + std::to_string(d.h) +
         " o=" + std::to_string(d.o) + " k=" + std::to_string(d.kh) + " stride=" +
         std::to_string(d.stride) + " pad=" + std::to_string(d.padding) + " " + name(d.dtype) +
         (d.channels_last ? " channels-last" : " NCHW") + (d.has_bias ? " bias " : "") +
         (d.has_bias ? name(d.bias_dtype) : "") + (d.tf32 ? " tf32" : "");
}

/// Sums of f32 products in another order, rounded once: a 16-bit output is off by at most about
/// one unit in its last place; f32 outputs by a few of f32's (TF32 products: of TF32's).
double tolerance(const Conv2dDesc& d) {
  if (d.tf32) return 4.0 / 2048;  // TF32 keeps 10 mantissa bits per operand
  return d.dtype == DType::f32 ? 64 * traits(DType::f32).epsilon : 2 * traits(d.dtype).epsilon;
}

/// Runs `call` twice into `out` (bytes of `want`'s size on the device): the first result must
/// match `want`, the second must have the first's bits.
template <class Call>
void check_twice(const Conv2dDesc& d, const Buffer& want, DeviceBytes& out, Call&& call,
                 const char* what) {
  Buffer first(want.dtype(), want.size());
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(call()) << what << ": " << cudnn_conv_last_error();
    Buffer got(want.dtype(), want.size());
    out.to_host(got.data());
    if (run == 0) {
      expect_close(got, want, tolerance(d), what);
      std::memcpy(first.data(), got.data(), bytes_of(got));
    } else {
      EXPECT_EQ(std::memcmp(first.data(), got.data(), bytes_of(got)), 0)
          << what << ": the second run gave other bits (a nondeterministic engine ran)";
    }
  }
}

void run_case(const Conv2dDesc& d) {
  SCOPED_TRACE(label(d));
  const char* refused = cudnn_conv_refusal(d);
  ASSERT_EQ(refused, nullptr) << "cuDNN must take this case on a GPU: " << refused;
  const std::int64_t nx = d.n * d.c * d.h * d.w, nw = d.o * d.c * d.kh * d.kw,
                     ny = d.n * d.o * d.out_h() * d.out_w();
  const Buffer x = random_buffer(d.dtype, nx, -1.0f, 1.0f, 1),
               w = random_buffer(d.dtype, nw, -0.5f, 0.5f, 2),
               bias = random_buffer(d.bias_dtype, d.o, -1.0f, 1.0f, 3),
               dy = random_buffer(d.dtype, ny, -1.0f, 1.0f, 4);
  Buffer y(d.dtype, ny), dx(d.dtype, nx), dw(d.dtype, nw);
  ref::conv2d(d, x.data(), w.data(), d.has_bias ? bias.data() : nullptr, y.data());
  ref::conv2d_backward_data(d, dy.data(), w.data(), dx.data());
  ref::conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), nullptr);

  mixprec::detail::cuda_set_device(0);
  DeviceBytes x_d(x.data(), bytes_of(x)), w_d(w.data(), bytes_of(w)),
      bias_d(bias.data(), bytes_of(bias)), dy_d(dy.data(), bytes_of(dy)), y_d(bytes_of(y)),
      dx_d(bytes_of(dx)), dw_d(bytes_of(dw));
  check_twice(d, y, y_d, [&] {
    return cudnn_conv2d(d, x_d.get(), w_d.get(), d.has_bias ? bias_d.get() : nullptr, y_d.get());
  }, "y");
  check_twice(d, dx, dx_d, [&] {
    return cudnn_conv2d_backward_data(d, dy_d.get(), w_d.get(), dx_d.get());
  }, "dx");
  check_twice(d, dw, dw_d, [&] {
    return cudnn_conv2d_backward_weights(d, x_d.get(), dy_d.get(), dw_d.get());
  }, "dweight");
}

class GpuCudnnConv : public testing::Test {
 protected:
  void SetUp() override {
    if (!gputest::on_cuda()) GTEST_SKIP() << gputest::kSkipReason;
  }
};

TEST_F(GpuCudnnConv, ThreeByThreeMatchesTheReferenceInEveryDtypeAndLayout) {
  for (DType t : {DType::bf16, DType::f16, DType::f32}) {
    for (bool channels_last : {true, false}) {
      run_case(desc(2, 32, 14, 48, 3, 1, 1, t, channels_last));
    }
  }
}

TEST_F(GpuCudnnConv, StridedAndPointwiseMatchTheReference) {
  for (bool channels_last : {true, false}) {
    run_case(desc(2, 64, 15, 32, 3, 2, 1, DType::bf16, channels_last));  // odd extent, stride 2
    run_case(desc(4, 64, 8, 128, 1, 1, 0, DType::bf16, channels_last));  // a bottleneck's 1x1
    run_case(desc(4, 32, 8, 64, 1, 2, 0, DType::f16, channels_last));    // a downsampling 1x1
  }
}

TEST_F(GpuCudnnConv, BiasIsAddedBeforeTheOneRounding) {
  for (bool channels_last : {true, false}) {
    for (DType bias : {DType::bf16, DType::f32}) {
      Conv2dDesc d = desc(2, 32, 10, 40, 3, 1, 1, DType::bf16, channels_last);
      d.has_bias = true;
      d.bias_dtype = bias;
      run_case(d);
    }
  }
  Conv2dDesc d = desc(2, 16, 10, 24, 3, 1, 1, DType::f32, true);
  d.has_bias = true;
  run_case(d);
}

TEST_F(GpuCudnnConv, Float32WithTf32AllowedMatchesWithinTf32) {
  Conv2dDesc d = desc(2, 32, 14, 48, 3, 1, 1, DType::f32, true);
  d.tf32 = true;
  run_case(d);
}

}  // namespace
}  // namespace mixprec::kernels::cuda

#endif  // MIXPREC_TESTS_CUDNN
