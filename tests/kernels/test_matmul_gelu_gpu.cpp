// The gelu_tanh post-op on a GPU at a GPT-2-small MLP's shape (d 768, hidden 3072): the cuda
// backend's matmul_aux and matmul_post_op_backward against the reference, which path ran (the
// verbose line: cuBLASLt's GELU_AUX_BIAS and DGELU_BGRAD or DGELU epilogues are expected at this
// shape), and each output's worst error as a fraction of the tolerance
// (kernels/gelu_epilogue_tolerance.h), printed so a run shows how much of it cuBLASLt uses;
// every call twice for the same bits. GPU-only: it runs when MIXPREC_CONFORMANCE_DEVICE is cuda
// (scripts/check-cuda.sh runs the Gpu* tests), elsewhere it skips with that reason.
#include <gtest/gtest.h>

#if MIXPREC_TESTS_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/backend.h"
#include "kernels/gelu_epilogue_tolerance.h"
#include "kernels/gpu_test_util.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using gputest::bytes_of;
using gputest::DeviceBytes;
using ktest::Buffer;
using ktest::random_buffer;

/// got against want within gemm + k eps |want| + slack_i; returns the worst fraction used.
template <class Slack>
double worst_fraction(const Buffer& got, const Buffer& want, double gemm, double k, Slack&& slack,
                      const std::string& what) {
  const double e = ktest::eps(want.dtype());
  double worst = 0.0;
  for (std::int64_t i = 0; i < want.size(); ++i) {
    const double tol = gemm + k * e * std::fabs(want.get(i)) + slack(i);
    worst = std::max(worst, std::fabs(double(got.get(i)) - want.get(i)) / tol);
  }
  std::cout << "[ gelu epilogue ] " << what << ": worst error " << worst << " of the tolerance\n";
  ::testing::Test::RecordProperty(what, std::to_string(worst));
  return worst;
}

/// Runs call twice, expects the same bits, and returns the first run's verbose line of `entry`
/// (printed: which path ran).
template <class Call>
std::string twice(Call&& call, const DeviceBytes& out, std::size_t bytes, const char* entry) {
  set_verbose(true);
  ::testing::internal::CaptureStderr();
  call();
  const std::string all = ::testing::internal::GetCapturedStderr();
  set_verbose(false);
  const std::size_t at = all.find(std::string("mixprec: ") + entry);
  const std::string log = at == std::string::npos ? all : all.substr(at, all.find('\n', at) - at);
  std::cout << "[ gelu epilogue ] " << log << "\n";
  std::vector<unsigned char> first(bytes), second(bytes);
  out.to_host(first.data());
  call();
  out.to_host(second.data());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), bytes), 0) << entry << ": a second run gave other bits";
  return log;
}

void run_mlp_shape(DType t, DType grad_dtype) {
  const std::int64_t m = 256, d = 768, hidden = 3072;
  SCOPED_TRACE(std::string(name(t)) + ", bias gradient " + name(grad_dtype));
  const Backend& cuda = cuda_backend();
  mixprec::detail::cuda_set_device(0);
  const double e32 = ktest::eps(DType::f32);

  // Forward: h = x W1^T + b1 kept, g = gelu(h).
  MatmulDesc f;
  f.m = m, f.n = hidden, f.k = d, f.trans_b = true, f.dtype = t, f.c_dtype = t;
  f.has_bias = true, f.bias_dtype = t, f.post_op = MatmulPostOp::gelu_tanh;
  const Buffer x = random_buffer(t, m * d, -1.0f, 1.0f, 1), w1 = random_buffer(t, hidden * d, -0.1f, 0.1f, 2);
  const Buffer b1 = random_buffer(t, hidden, -1.0f, 1.0f, 3);
  Buffer g_ref(t, m * hidden), h_ref(t, m * hidden), g(t, m * hidden), h(t, m * hidden);
  ref::matmul_aux(f, x.data(), w1.data(), b1.data(), g_ref.data(), h_ref.data());
  DeviceBytes x_d(x.data(), bytes_of(x)), w1_d(w1.data(), bytes_of(w1)), b1_d(b1.data(), bytes_of(b1));
  DeviceBytes g_d(bytes_of(g)), h_d(bytes_of(h));
  const std::string forward_log = twice(
      [&] { cuda.matmul_aux(f, x_d.get(), w1_d.get(), b1_d.get(), g_d.get(), h_d.get()); }, g_d,
      bytes_of(g), "matmul_aux");
  EXPECT_NE(forward_log.find("cublasLt GELU_AUX_BIAS epilogue"), std::string::npos) << forward_log;
  g_d.to_host(g.data());
  h_d.to_host(h.data());
  const double gemm_f = 4.0 * std::sqrt(double(d) + 2.0) * e32 * (0.1 * double(d) + 1.0);
  EXPECT_LE(worst_fraction(h, h_ref, gemm_f, 2.0, [](std::int64_t) { return 0.0; }, "aux"), 1.0);
  EXPECT_LE(worst_fraction(g, g_ref, 1.2 * gemm_f, 4.0,
                           [&](std::int64_t i) { return ktest::gelu_forward_slack(t, h_ref.get(i)); },
                           std::string("C forward ") + name(t)),
            1.0);

  // Backward: dh = gelu'(h) (dy W2), db1 its column sums; aux from the reference's forward.
  MatmulDesc b;
  b.m = m, b.n = hidden, b.k = d, b.dtype = t, b.c_dtype = t;
  b.has_bias = true, b.bias_dtype = grad_dtype, b.post_op = MatmulPostOp::gelu_tanh;
  const Buffer dy = random_buffer(t, m * d, -1.0f, 1.0f, 4), w2 = random_buffer(t, d * hidden, -0.1f, 0.1f, 5);
  Buffer dh_ref(t, m * hidden), db_ref(grad_dtype, hidden), dh(t, m * hidden), db(grad_dtype, hidden);
  ref::matmul_post_op_backward(b, dy.data(), w2.data(), h_ref.data(), dh_ref.data(), db_ref.data());
  MatmulDesc plain = b;
  plain.post_op = MatmulPostOp::none, plain.has_bias = false, plain.c_dtype = DType::f32;
  Buffer product(DType::f32, m * hidden);
  ref::matmul(plain, dy.data(), w2.data(), nullptr, product.data());
  DeviceBytes dy_d(dy.data(), bytes_of(dy)), w2_d(w2.data(), bytes_of(w2)), aux_d(h_ref.data(), bytes_of(h_ref));
  DeviceBytes dh_d(bytes_of(dh)), db_d(bytes_of(db));
  const std::string backward_log = twice(
      [&] { cuda.matmul_post_op_backward(b, dy_d.get(), w2_d.get(), aux_d.get(), dh_d.get(), db_d.get()); },
      dh_d, bytes_of(dh), "matmul_post_op_backward");
  EXPECT_NE(backward_log.find("cublasLt DGELU"), std::string::npos) << backward_log;
  dh_d.to_host(dh.data());
  db_d.to_host(db.data());
  const double gemm_b = 4.0 * std::sqrt(double(d) + 2.0) * e32 * (0.1 * double(d));
  EXPECT_LE(worst_fraction(dh, dh_ref, 1.2 * gemm_b, 4.0,
                           [&](std::int64_t i) { return ktest::gelu_backward_slack(t, product.get(i)); },
                           std::string("C backward ") + name(t)),
            1.0);
  std::vector<double> column(static_cast<std::size_t>(hidden), 0.0);
  for (std::int64_t i = 0; i < m * hidden; ++i) column[static_cast<std::size_t>(i % hidden)] += std::fabs(product.get(i));
  EXPECT_LE(worst_fraction(db, db_ref, 1.2 * gemm_b * double(m), 1.0,
                           [&](std::int64_t j) {
                             const double s = column[static_cast<std::size_t>(j)];
                             return ktest::gelu_backward_slack(t, s) + double(m) * e32 * s;
                           },
                           std::string("bias gradient ") + name(t) + " -> " + name(grad_dtype)),
            1.0);
}

class GpuMatmulGelu : public testing::Test {
 protected:
  void SetUp() override {
    if (!gputest::on_cuda()) GTEST_SKIP() << gputest::kSkipReason;
  }
};

TEST_F(GpuMatmulGelu, Bf16MlpShapeRunsTheEpiloguesWithinTheTolerance) {
  run_mlp_shape(DType::bf16, DType::bf16);
  run_mlp_shape(DType::bf16, DType::f32);  // a master weight's f32 gradient: the training case
}

TEST_F(GpuMatmulGelu, F16AndF32MlpShapesRunTheEpiloguesWithinTheTolerance) {
  run_mlp_shape(DType::f16, DType::f16);
  run_mlp_shape(DType::f32, DType::f32);
}

}  // namespace
}  // namespace mixprec::kernels

#endif  // MIXPREC_TESTS_CUDA
