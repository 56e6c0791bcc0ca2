// Devices and the simulated device: where memory lives, that bytes cross only through counted
// transfers, that the host cannot dereference devsim memory, and that a devsim kernel refuses a
// host pointer where its contract wants device memory.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/elementwise.h"
#include "mixprec/core/device.h"
#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/core/transfer.h"

namespace mixprec {
namespace {

/// Runs a test body on the devsim backend and restores the previous backend (and device).
class OnDevsim {
 public:
  OnDevsim() : previous_(kernels::set_backend("devsim")) {}
  ~OnDevsim() { kernels::set_backend(previous_); }

 private:
  std::string previous_;
};

TEST(Device, ParsesAndNamesDevices) {
  EXPECT_EQ(to_string(parse_device("cpu")), "cpu");
  EXPECT_EQ(to_string(parse_device("cuda")), "cuda:0");
  EXPECT_EQ(to_string(parse_device("cuda:3")), "cuda:3");
  EXPECT_EQ(parse_device("devsim:1"), (Device{DeviceType::devsim, 1}));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cpu:0", "cuda:-1", ""}) {
    EXPECT_THROW(parse_device(bad), ValueError) << bad;
  }
}

TEST(Device, BackendMakesItsDeviceCurrent) {
  const Device before = current_device();
  {
    OnDevsim devsim;
    EXPECT_EQ(current_device(), (Device{DeviceType::devsim, 0}));
    EXPECT_EQ(Tensor::zeros({2}).device(), current_device());
  }
  EXPECT_EQ(current_device(), before);
}

TEST(Devsim, ValuesCrossOnlyThroughCountedTransfers) {
  OnDevsim devsim;
  const TransferStats before = transfer_stats();
  Tensor t;
  {
    const TransferReason why("test upload");
    t = Tensor::from_vector({1.5f, -2.0f, 3.25f}, {3});
  }
  EXPECT_FALSE(t.device().is_host());
  std::vector<float> back;
  {
    const TransferReason why("test download");
    back = t.to_vector();
  }
  EXPECT_EQ(back, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  const TransferStats d = transfer_delta(before, transfer_stats());
  EXPECT_EQ(d.uploads, 1u);
  EXPECT_EQ(d.bytes_up, 12u);
  EXPECT_EQ(d.downloads, 1u);
  EXPECT_EQ(d.bytes_down, 12u);
  EXPECT_EQ(d.downloads_by_reason.at("test download"), 1u);

  // to(Device) moves the bytes and counts them; the host copy is dereferenceable.
  const Tensor host = t.to(Device{});
  EXPECT_TRUE(host.device().is_host());
  EXPECT_EQ(host.data<float>()[2], 3.25f);
  const Tensor again = host.to(t.device());
  EXPECT_EQ(again.to_vector(), back);
}

TEST(Devsim, KernelsComputeOnDeviceMemory) {
  OnDevsim devsim;
  const Tensor a = Tensor::full({5}, 2.0f);
  Tensor out = Tensor::empty({5});
  kernels::affine(a.data_ptr(), DType::f32, out.data_ptr(), DType::f32, 5, 3.0f, 1.0f);
  EXPECT_EQ(out.to_vector(), std::vector<float>(5, 7.0f));
}

TEST(Devsim, AKernelRefusesAHostPointer) {
  OnDevsim devsim;
  std::vector<float> host(4, 0.0f);
  try {
    kernels::fill(host.data(), DType::f32, 4, 1.0f);
    FAIL() << "a devsim kernel wrote through a host pointer";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("fill"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("host address"), std::string::npos) << e.what();
  }
  EXPECT_EQ(host, std::vector<float>(4, 0.0f));
}

// The property every devsim CLI run relies on: a stray host read of tensor memory cannot
// silently succeed, it faults.
TEST(DevsimDeathTest, HostReadOfDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        OnDevsim devsim;
        const Tensor t = Tensor::full({4}, 1.0f);
        volatile float v = static_cast<const float*>(t.data_ptr())[0];
        (void)v;
      },
      "");
}

}  // namespace
}  // namespace mixprec
