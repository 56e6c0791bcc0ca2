// The GPU inventory and --device's checks, on any machine: either GPUs or one reason, and every
// way cuda cannot be used is one BackendError carrying that reason.
#include <gtest/gtest.h>

#include <string>

#include "mixprec/core/error.h"
#include "mixprec/core/gpu.h"
#include "mixprec/runtime/runtime.h"

namespace mixprec {
namespace {

TEST(GpuInventory, ListsGpusOrSaysWhyThereAreNone) {
  const GpuInventory& inv = gpu_inventory();
  EXPECT_EQ(inv.built_with_cuda, MIXPREC_TESTS_CUDA != 0);
  EXPECT_NE(inv.gpus.empty(), inv.why_none.empty()) << inv.why_none;
  if (!inv.built_with_cuda) {
    EXPECT_NE(inv.why_none.find("built without CUDA"), std::string::npos) << inv.why_none;
  }
  for (const GpuInfo& g : inv.gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.sm_count, 0);
    EXPECT_GT(g.memory_bytes, 0u);
  }
}

TEST(GpuInventory, TensorCoreTypesFollowTheGeneration) {
  const GpuInfo turing = tensor_core_types(7, 5);
  EXPECT_TRUE(turing.tensor_fp16);
  EXPECT_FALSE(turing.tensor_bf16 || turing.tensor_tf32 || turing.tensor_fp8);
  const GpuInfo ampere = tensor_core_types(8, 0);
  EXPECT_TRUE(ampere.tensor_fp16 && ampere.tensor_bf16 && ampere.tensor_tf32);
  EXPECT_FALSE(ampere.tensor_fp8);
  EXPECT_FALSE(tensor_core_types(8, 6).tensor_fp8);
  EXPECT_TRUE(tensor_core_types(8, 9).tensor_fp8);  // Ada
  const GpuInfo hopper = tensor_core_types(9, 0);
  EXPECT_TRUE(hopper.tensor_fp16 && hopper.tensor_bf16 && hopper.tensor_tf32 && hopper.tensor_fp8);
}

TEST(GpuInventory, RequireGpuFailsWithTheReasonOrTheCount) {
  const GpuInventory& inv = gpu_inventory();
  if (inv.gpus.empty()) {
    try {
      require_gpu(0);
      ADD_FAILURE() << "require_gpu(0) passed with no GPU";
    } catch (const BackendError& e) {
      EXPECT_NE(std::string(e.what()).find(inv.why_none), std::string::npos) << e.what();
    }
  } else {
    EXPECT_NO_THROW(require_gpu(0));
    const int past = static_cast<int>(inv.gpus.size());
    try {
      require_gpu(past);
      ADD_FAILURE() << "require_gpu past the last GPU passed";
    } catch (const BackendError& e) {
      EXPECT_NE(std::string(e.what()).find("no GPU " + std::to_string(past)), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(require_gpu(-1), BackendError);
}

TEST(SetDevice, SelectsTheBackendOrSaysWhyNot) {
  const std::string before = kernel_backend();
  set_device("devsim");
  EXPECT_EQ(kernel_backend(), "devsim");
  set_device("cpu");  // the host backend: cpu, or ref where MIXPREC_BACKEND=ref
  EXPECT_NE(kernel_backend(), "devsim");
  const std::string host = kernel_backend();
  EXPECT_THROW(set_device("tpu"), ValueError);
  const GpuInventory& inv = gpu_inventory();
  if (inv.gpus.empty()) {
    EXPECT_THROW(set_device("cuda"), BackendError);
    EXPECT_EQ(kernel_backend(), host);  // a refused device changes nothing
  } else {
    set_device("cuda");
    EXPECT_EQ(kernel_backend(), "cuda");
    set_device("cpu");
  }
  EXPECT_THROW(set_device("cuda:" + std::to_string(inv.gpus.size())), BackendError);
  EXPECT_EQ(kernel_backend(), host);
  if (before == "devsim") set_device("devsim");
}

}  // namespace
}  // namespace mixprec
