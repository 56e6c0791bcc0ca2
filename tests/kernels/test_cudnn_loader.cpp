// The cuDNN loader (src/kernels/cuda/cudnn_loader.h) and the cuDNN attention's refusals. The
// loader needs no GPU: it opens libcudnn.so.9 and asks cudnnGetVersion, so these run on every
// machine of a build with the cuDNN path. That build must find the library (the toolkit's or a
// wheel's): a machine without it fails here, naming what was searched, rather than skipping.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/attention.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/cudnn_loader.h"
#include "mixprec/core/gpu.h"
#include "mixprec/kernels/cudnn.h"

namespace mixprec::kernels::cuda {
namespace {

/// A desc cuDNN takes: GPT-style heads read in place from a [B, T, H, d] projection.
AttentionDesc takeable() {
  AttentionDesc d;
  d.bh = 6;
  d.heads = 3;
  d.tq = d.tk = 200;
  d.d = d.dv = 64;
  d.dtype = DType::bf16;
  d.scale = 0.125f;
  d.causal = true;
  d.round_probs = true;
  const AttentionLayout heads{200 * 3 * 64, 64, 3 * 64};
  d.q_rows = d.k_rows = d.v_rows = d.out_rows = heads;
  return d;
}

std::string refusal(const AttentionDesc& d, const char* loaded_why_none = "") {
  const char* why = cudnn_attention_refusal_given(d, loaded_why_none);
  return why != nullptr ? why : "";
}

TEST(CudnnAttention, RefusesWhatItCannotComputeAndSaysWhy) {
  EXPECT_EQ(refusal(takeable()), "");
  AttentionDesc d = takeable();
  d.dtype = DType::f32;
  EXPECT_NE(refusal(d).find("dtype f32"), std::string::npos) << refusal(d);
  d = takeable();
  const float mask = 0.0f;
  const std::int64_t offsets[6] = {};
  d.mask = &mask;
  d.mask_offsets = offsets;
  EXPECT_NE(refusal(d).find("mask"), std::string::npos) << refusal(d);
  d = takeable();
  d.dropout_p = 0.1f;
  EXPECT_NE(refusal(d).find("dropout"), std::string::npos) << refusal(d);
  d = takeable();
  d.round_probs = false;
  EXPECT_NE(refusal(d).find("round_probs"), std::string::npos) << refusal(d);
  d = takeable();
  d.d = d.dv = 60;
  EXPECT_NE(refusal(d).find("head size"), std::string::npos) << refusal(d);
  d = takeable();
  d.heads = 4;
  EXPECT_NE(refusal(d).find("heads 4"), std::string::npos) << refusal(d);
  d = takeable();
  d.q_rows.row = 3 * 64 + 4;
  EXPECT_NE(refusal(d).find("strides"), std::string::npos) << refusal(d);
  // Without a library the refusal carries the loader's reason.
  EXPECT_EQ(refusal(takeable(), "MIXPREC_CUDNN=off"), "cuDNN not loaded: MIXPREC_CUDNN=off");
}

TEST(CudnnAttention, RunsNothingWhenRefused) {
  AttentionDesc d = takeable();
  d.dtype = DType::f32;
  EXPECT_FALSE(cudnn_attention_forward(d, nullptr, nullptr, nullptr, nullptr, nullptr));
  EXPECT_NE(std::string(cudnn_attention_last_error()).find("dtype f32"), std::string::npos);
  EXPECT_FALSE(cudnn_attention_backward(d, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                        nullptr, nullptr, nullptr));
}

TEST(CudnnLoader, VersionsReadAsTheirReleases) {
  EXPECT_EQ(cudnn_version_text(91900), "9.19.0");
  EXPECT_EQ(cudnn_version_text(90102), "9.1.2");
  EXPECT_EQ(cudnn_version_text(8907), "8.9.7");
}

#if MIXPREC_TESTS_CUDNN

TEST(CudnnLoader, OffIsNoneWithThatReason) {
  const CudnnLibrary lib = find_cudnn("off", false);
  EXPECT_EQ(lib.handle, nullptr);
  EXPECT_EQ(lib.why_none, "MIXPREC_CUDNN=off");
}

TEST(CudnnLoader, AMissingPathIsNamed) {
  const CudnnLibrary lib = find_cudnn("/nonexistent/cudnn", false);
  EXPECT_EQ(lib.handle, nullptr);
  EXPECT_NE(lib.why_none.find("/nonexistent/cudnn"), std::string::npos) << lib.why_none;
}

TEST(CudnnLoader, ABrokenFileIsNamedAndRefused) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mixprec_fake_cudnn_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "libcudnn.so.9";
  std::ofstream(file) << "not an ELF file\n";
  for (const std::string& setting : {dir.string(), file.string()}) {
    const CudnnLibrary lib = find_cudnn(setting.c_str(), false);
    EXPECT_EQ(lib.handle, nullptr);
    EXPECT_NE(lib.why_none.find(file.string()), std::string::npos) << lib.why_none;
    EXPECT_NE(lib.why_none.find("dlopen failed"), std::string::npos) << lib.why_none;
  }
  fs::remove_all(dir);
}

TEST(CudnnLoader, TheDefaultSearchFindsCudnn9) {
  const CudnnLibrary lib = find_cudnn(nullptr, false);
  ASSERT_TRUE(lib.why_none.empty())
      << "this build has the cuDNN path, so the machine that tests it needs libcudnn.so.9 >= "
      << cudnn_required_text() << " (the CUDA toolkit's, or pip's nvidia-cudnn-cu13): "
      << lib.why_none;
  EXPECT_EQ(lib.version / 10000, 9u) << lib.version;
  EXPECT_GE(lib.version, cudnn_built_version() / 100 * 100);
  EXPECT_NE(lib.path.find("libcudnn.so.9"), std::string::npos) << lib.path;
  // The same file when named explicitly, and by its folder.
  const CudnnLibrary again = find_cudnn(lib.path.c_str(), false);
  EXPECT_EQ(again.why_none, "");
  EXPECT_EQ(again.version, lib.version);
  const std::string folder = std::filesystem::path(lib.path).parent_path().string();
  EXPECT_EQ(find_cudnn(folder.c_str(), false).version, lib.version);
}

TEST(CudnnLoader, EnvReportsTheProcessLibraryOrWhy) {
  const CudnnInfo info = cudnn_info();
  EXPECT_TRUE(info.built_with_cudnn);
  EXPECT_EQ(info.required, cudnn_required_text());
  const char* setting = std::getenv("MIXPREC_CUDNN");
  if (setting == nullptr) {
    EXPECT_EQ(info.why_none, "") << "the default search failed in this process";
    EXPECT_EQ(info.version.substr(0, 2), "9.");
  } else {
    EXPECT_NE(info.why_none.empty(), info.path.empty());
  }
}

#else

TEST(CudnnLoader, ABuildWithoutCudnnSaysSo) {
  const CudnnLibrary lib = find_cudnn(nullptr, false);
  EXPECT_EQ(lib.handle, nullptr);
  EXPECT_NE(lib.why_none.find("built without"), std::string::npos) << lib.why_none;
  EXPECT_FALSE(cudnn_info().built_with_cudnn);
  const char* why = cudnn_attention_refusal(takeable());
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("built without"), std::string::npos) << why;
}

#endif

}  // namespace
}  // namespace mixprec::kernels::cuda
