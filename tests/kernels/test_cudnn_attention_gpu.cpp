// cuDNN's fused SDPA (src/kernels/cuda/attention_cudnn.h) on a GPU against the reference
// (kernels::ref with round_probs, the 16-bit spec cuDNN computes), forward and backward, with the
// projections' strided heads and contiguous rows, causal or not. GPU-only: it runs when
// MIXPREC_CONFORMANCE_DEVICE is cuda (scripts/check-cuda.sh runs the Gpu* tests), and there
// cuDNN must load; elsewhere it skips with that reason. Built only with the cuDNN path.
#include <gtest/gtest.h>

#if MIXPREC_TESTS_CUDNN

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/attention.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/gpu_test_util.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels::cuda {
namespace {

using gputest::bytes_of;
using gputest::DeviceBytes;
using gputest::expect_close;
using ktest::Buffer;
using ktest::random_buffer;

struct Case {
  std::int64_t b, h, t, d;
  bool causal, strided;
  DType dtype;
};

std::string label(const Case& c) {
  return "B=" + std::to_string(c.b) + " H=" + std::to_string(c.h) + " T=" + std::to_string(c.t) +
         " d=" + std::to_string(c.d) + (c.causal ? " causal" : "") +
         (c.strided ? " [B,T,H,d] heads" : " contiguous") + " " + name(c.dtype);
}

void run_case(const Case& c) {
  SCOPED_TRACE(label(c));
  AttentionDesc desc;
  desc.bh = c.b * c.h;
  desc.heads = c.h;
  desc.tq = desc.tk = c.t;
  desc.d = desc.dv = c.d;
  desc.dtype = c.dtype;
  desc.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  desc.causal = c.causal;
  desc.round_probs = true;
  if (c.strided) {  // a projection's [B, T, H, d] output, read in place
    const AttentionLayout heads{c.t * c.h * c.d, c.d, c.h * c.d};
    desc.q_rows = desc.k_rows = desc.v_rows = desc.out_rows = heads;
  }
  const char* refused = cudnn_attention_refusal(desc);
  ASSERT_EQ(refused, nullptr) << "cuDNN must take this case on a GPU: " << refused;

  const std::int64_t n = c.b * c.t * c.h * c.d;  // every operand has this many elements
  const Buffer q = random_buffer(c.dtype, n, -1.5f, 1.5f, 1), k = random_buffer(c.dtype, n, -1.5f, 1.5f, 2),
               v = random_buffer(c.dtype, n, -1.0f, 1.0f, 3), dout = random_buffer(c.dtype, n, -1.0f, 1.0f, 4);
  Buffer out(c.dtype, n), dq(c.dtype, n), dk(c.dtype, n), dv(c.dtype, n);
  std::vector<float> lse(static_cast<std::size_t>(desc.bh * c.t));
  ref::attention_forward(desc, q.data(), k.data(), v.data(), out.data(), lse.data());
  ref::attention_backward(desc, q.data(), k.data(), v.data(), out.data(), lse.data(), dout.data(),
                          dq.data(), dk.data(), dv.data());

  mixprec::detail::cuda_set_device(0);
  const std::size_t bytes = bytes_of(q), lse_bytes = lse.size() * sizeof(float);
  DeviceBytes q_d(q.data(), bytes), k_d(k.data(), bytes), v_d(v.data(), bytes),
      dout_d(dout.data(), bytes), out_d(bytes), lse_d(lse_bytes);
  ASSERT_TRUE(cudnn_attention_forward(desc, q_d.get(), k_d.get(), v_d.get(), out_d.get(),
                                      static_cast<float*>(lse_d.get())))
      << cudnn_attention_last_error();
  Buffer out_got(c.dtype, n);
  std::vector<float> lse_got(lse.size());
  out_d.to_host(out_got.data());
  lse_d.to_host(lse_got.data());
  const double eps = traits(c.dtype).epsilon;
  expect_close(out_got, out, 4 * eps, "out");
  for (std::size_t i = 0; i < lse.size(); ++i) {
    ASSERT_NEAR(lse_got[i], lse[i], 1e-4 * std::max(1.0f, std::fabs(lse[i]))) << "lse " << i;
  }

  // The backward from the reference's out and lse, so both sides start from the same bits.
  DeviceBytes out_ref_d(out.data(), bytes), lse_ref_d(lse.data(), lse_bytes), dq_d(bytes),
      dk_d(bytes), dv_d(bytes);
  Buffer first[3] = {Buffer(c.dtype, n), Buffer(c.dtype, n), Buffer(c.dtype, n)};
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(cudnn_attention_backward(desc, q_d.get(), k_d.get(), v_d.get(), out_ref_d.get(),
                                         static_cast<const float*>(lse_ref_d.get()), dout_d.get(),
                                         dq_d.get(), dk_d.get(), dv_d.get()))
        << cudnn_attention_last_error();
    Buffer got[3] = {Buffer(c.dtype, n), Buffer(c.dtype, n), Buffer(c.dtype, n)};
    dq_d.to_host(got[0].data());
    dk_d.to_host(got[1].data());
    dv_d.to_host(got[2].data());
    if (run == 0) {
      expect_close(got[0], dq, 8 * eps, "dq");
      expect_close(got[1], dk, 8 * eps, "dk");
      expect_close(got[2], dv, 8 * eps, "dv");
      for (int i = 0; i < 3; ++i) std::memcpy(first[i].data(), got[i].data(), bytes);
    } else {
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(std::memcmp(first[i].data(), got[i].data(), bytes), 0)
            << "the deterministic backward gave other bits on its second run (gradient " << i << ")";
      }
    }
  }
}

class GpuCudnnAttention : public testing::Test {
 protected:
  void SetUp() override {
    if (!gputest::on_cuda()) GTEST_SKIP() << gputest::kSkipReason;
  }
};

TEST_F(GpuCudnnAttention, StridedHeadsMatchTheReference) {
  run_case({2, 3, 200, 64, false, true, DType::bf16});
  run_case({2, 3, 200, 64, true, true, DType::bf16});
}

TEST_F(GpuCudnnAttention, ContiguousRowsMatchTheReference) {
  run_case({2, 3, 200, 64, true, false, DType::bf16});
  run_case({2, 3, 200, 64, false, false, DType::f16});
}

TEST_F(GpuCudnnAttention, LongCausalSequenceMatchesTheReference) {
  run_case({2, 3, 1024, 64, true, true, DType::bf16});
}

TEST_F(GpuCudnnAttention, Float16StridedCausalMatchesTheReference) {
  run_case({2, 3, 200, 64, true, true, DType::f16});
}

}  // namespace
}  // namespace mixprec::kernels::cuda

#endif  // MIXPREC_TESTS_CUDNN
