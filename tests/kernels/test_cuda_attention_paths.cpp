// Which attention path the cuda backend gives a call: the Tensor-Core flash kernels' refusals
// are host logic, checked here on any machine with a CUDA build (no GPU needed). That the
// kernels compute the spec is the device conformance harness's job (scripts/check-cuda.sh).
#include <gtest/gtest.h>

#if MIXPREC_TESTS_CUDA
#include <cstdint>
#include <string>

#include "kernels/attention.h"
#include "kernels/cuda/attention_flash.h"
#include "kernels/cuda/attention_path.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

/// The GPT layout: [B, T, H, d] projections read as [B, H, T, d], bf16, rounded P and dS.
AttentionDesc gpt_call() {
  AttentionDesc d;
  d.bh = 2 * 12;
  d.heads = 12;
  d.tq = d.tk = 1024;
  d.d = d.dv = 64;
  d.dtype = DType::bf16;
  d.causal = true;
  d.round_probs = true;
  const AttentionLayout rows{1024 * 12 * 64, 64, 12 * 64};
  d.q_rows = d.k_rows = d.v_rows = d.out_rows = rows;
  return d;
}

alignas(16) const unsigned char kBuffer[64] = {};
const void* const kAligned = kBuffer;
const void* const kOdd = kBuffer + 2;  // a bf16 element off a 16-byte boundary

std::string refusal(const AttentionDesc& d, const void* p = kAligned) {
  const char* why = cuda::flash_attention_refusal(d, {kAligned, kAligned, p, kAligned});
  return why == nullptr ? "" : why;
}

TEST(CudaAttentionPaths, FlashTakesTheGptCallsInBothSixteenBitTypes) {
  AttentionDesc d = gpt_call();
  EXPECT_EQ(refusal(d), "");
  d.dtype = DType::f16;
  EXPECT_EQ(refusal(d), "");
  for (std::int64_t size : {32, 128}) {
    d.d = d.dv = size;
    d.q_rows = d.k_rows = d.v_rows = d.out_rows = {};  // contiguous [bh, t, size]
    EXPECT_EQ(refusal(d), "") << size;
  }
}

TEST(CudaAttentionPaths, FlashRefusesWhatItCannotComputeAndSaysWhy) {
  AttentionDesc d = gpt_call();
  d.dtype = DType::f32;
  d.round_probs = false;
  EXPECT_NE(refusal(d).find("f32"), std::string::npos);
  d = gpt_call();
  d.round_probs = false;  // attention precision highest: P and dS stay f32
  EXPECT_NE(refusal(d).find("highest"), std::string::npos);
  d = gpt_call();
  d.d = d.dv = 80;
  EXPECT_NE(refusal(d).find("head size"), std::string::npos);
  d = gpt_call();
  d.dv = 32;
  EXPECT_NE(refusal(d).find("differ"), std::string::npos);
  d = gpt_call();
  EXPECT_NE(refusal(d, kOdd).find("16-byte"), std::string::npos);
  d = gpt_call();
  d.k_rows.row = 12 * 64 + 4;  // rows 8 bytes apart
  EXPECT_NE(refusal(d).find("16-byte"), std::string::npos);
}

using cuda::AttentionPath;

TEST(CudaAttentionPaths, EachCallTakesTheFirstPathThatAcceptsIt) {
  const std::initializer_list<const void*> buffers = {kAligned, kAligned, kAligned, kAligned};
  // From the flash path on (the cudnn path's answer depends on this machine's cuDNN).
  AttentionDesc d = gpt_call();
  cuda::AttentionChoice c = cuda::choose_attention_path(d, buffers, AttentionPath::flash, true);
  EXPECT_EQ(c.path, AttentionPath::flash);
  d.dtype = DType::f32;
  d.round_probs = false;
  c = cuda::choose_attention_path(d, buffers, AttentionPath::flash, true);
  EXPECT_EQ(c.path, AttentionPath::gemm);
  EXPECT_NE(c.skipped.find("flash (f32"), std::string::npos) << c.skipped;
  const float mask = 0.0f;
  const std::int64_t offsets = 0;
  d.mask = &mask;
  d.mask_offsets = &offsets;
  c = cuda::choose_attention_path(d, buffers, AttentionPath::flash, true);
  EXPECT_EQ(c.path, AttentionPath::tiles);
  EXPECT_NE(c.skipped.find("gemm (an additive mask)"), std::string::npos) << c.skipped;
  // A later start skips the faster paths whatever they would say.
  c = cuda::choose_attention_path(gpt_call(), buffers, AttentionPath::gemm, true);
  EXPECT_EQ(c.path, AttentionPath::gemm);
  EXPECT_NE(c.skipped.find("MIXPREC_ATTENTION"), std::string::npos) << c.skipped;
  // Without reasons asked for, none are built.
  c = cuda::choose_attention_path(d, buffers, AttentionPath::flash, false);
  EXPECT_TRUE(c.skipped.empty());
}

TEST(CudaAttentionPaths, MixprecAttentionNamesAPath) {
  EXPECT_EQ(cuda::parse_attention_path("auto"), AttentionPath::cudnn);
  EXPECT_EQ(cuda::parse_attention_path("flash"), AttentionPath::flash);
  EXPECT_EQ(cuda::parse_attention_path("tiles"), AttentionPath::tiles);
  try {
    cuda::parse_attention_path("fast");
    FAIL() << "accepted 'fast'";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("auto, cudnn, flash, gemm or tiles"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mixprec::kernels
#endif  // MIXPREC_TESTS_CUDA
