// The CUDA-graph capture probe (train/capture_probe.h) off a GPU: refused, with the reason, on
// cpu and devsim and in builds without CUDA, before it touches anything. What it reports on a
// GPU is scripts/check-cuda.sh's to show (docs/cuda.md, "The next GPU run").
#include <gtest/gtest.h>

#include "backend_scope.h"
#include "mixprec/core/error.h"
#include "mixprec/core/gpu.h"
#include "mixprec/train/capture_probe.h"

namespace mixprec::train {
namespace {

TEST(CaptureProbe, IsRefusedOffAGpuWithTheReason) {
  for (const char* backend : {"cpu", "devsim"}) {
    testing::BackendScope scope(backend);
    const std::string why = capture_probe_refusal();
    if (gpu_inventory().built_with_cuda) {
      EXPECT_NE(why.find("add --device cuda (this run is on "), std::string::npos) << why;
    } else {
      EXPECT_NE(why.find(gpu_inventory().why_none), std::string::npos) << why;
    }
    bool ran = false;
    EXPECT_THROW(probe_cuda_capture("nothing", [&] { ran = true; }), ValueError) << backend;
    EXPECT_FALSE(ran) << backend;
  }
}

}  // namespace
}  // namespace mixprec::train
