// A device backend against the reference: each conformance case (conformance_cases.h) runs on
// "ref" on the host, then twice on the device backend through the staged table
// (device_staging.h): the first device run must match the reference within the case's
// tolerances, the second must repeat the first bit for bit (device kernels are deterministic).
// The device is MIXPREC_CONFORMANCE_DEVICE: scripts/check-cuda.sh sets cuda (or cuda:N) on a
// machine with a GPU; without it, devsim, which every machine runs: that checks the staging
// itself and that every kernel contract takes device memory only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "conformance/conformance_cases.h"
#include "conformance/device_staging.h"
#include "kernels/backend.h"
#include "mixprec/core/device.h"
#include "mixprec/core/transfer.h"
#include "mixprec/runtime/runtime.h"

namespace mixprec::kernels {
namespace {

using conformance::BackendScope;
using conformance::Case;
using conformance::Outs;

/// The device under test: MIXPREC_CONFORMANCE_DEVICE, devsim when unset.
Device device_under_test() {
  const char* env = std::getenv("MIXPREC_CONFORMANCE_DEVICE");
  return parse_device(env != nullptr && env[0] != '\0' ? env : "devsim");
}

/// The device's backend, with the process switched to the device (cudaSetDevice for cuda).
const Backend& backend_of(Device device) {
  mixprec::set_device(to_string(device));
  return device.type == DeviceType::cuda ? cuda_backend() : devsim_backend();
}

/// outs with every output compared bit for bit (a device run against the run before it).
Outs all_exact(Outs outs) {
  for (conformance::Out& o : outs) o.exact = true;
  return outs;
}

class DeviceConformance : public testing::TestWithParam<Case> {};

TEST_P(DeviceConformance, MatchesTheReferenceAndRepeatsItself) {
  const Case& c = GetParam();
  const Device device = device_under_test();
  ASSERT_NE(device.type, DeviceType::cpu)
      << "MIXPREC_CONFORMANCE_DEVICE=cpu: the cpu backend is checked by BackendConformance";
  const Backend& target = backend_of(device);
  const Backend table = conformance::staged(target, device);
  for (DType t : c.dtypes) {
    Outs want;
    {
      BackendScope scope(ref_backend());
      want = c.run(ref_backend(), t);
    }
    BackendScope scope(target);  // kernels that call entry points reach the device's kernels
    const std::string where = c.name + " " + name(t) + " on " + to_string(device);
    const Outs first = c.run(table, t);
    conformance::compare(first, want, where);
    conformance::compare(c.run(table, t), all_exact(first), where + " (run twice)");
  }
  mixprec::set_device("cpu");
}

TEST(DeviceStaging, CopiesWrittenBuffersBackAndNamesAnUnstageablePointer) {
  const Device devsim = parse_device("devsim");
  const Backend table = conformance::staged(devsim_backend(), devsim);
  BackendScope scope(devsim_backend());
  ktest::Buffer out(DType::bf16, 1000);
  const TransferStats before = transfer_stats();
  table.fill(out.data(), DType::bf16, 1000, 2.5f);
  const TransferStats moved = transfer_delta(before, transfer_stats());
  EXPECT_EQ(moved.uploads, 1u);
  EXPECT_EQ(moved.downloads, 1u);  // the written buffer, once
  for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(out.get(i), 2.5f) << i;

  // A read-only argument goes up and is not downloaded.
  const ktest::Buffer in = ktest::random_buffer(DType::f32, 64, -1.0f, 1.0f, 3);
  ktest::Buffer y(DType::f32, 64);
  const TransferStats before2 = transfer_stats();
  table.affine(in.data(), DType::f32, y.data(), DType::f32, 64, 2.0f, 1.0f);
  const TransferStats moved2 = transfer_delta(before2, transfer_stats());
  EXPECT_EQ(moved2.uploads, 2u);
  EXPECT_EQ(moved2.downloads, 1u);
  for (std::int64_t i = 0; i < 64; ++i) ASSERT_EQ(y.get(i), 2.0f * in.get(i) + 1.0f) << i;

  std::vector<float> unregistered(8);
  try {
    table.fill(unregistered.data(), DType::f32, 8, 1.0f);
    FAIL() << "a pointer into no registered buffer was staged";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("fill: argument 1 points into no ktest::Buffer"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(AllKernels, DeviceConformance, testing::ValuesIn(conformance::cases()),
                         [](const testing::TestParamInfo<Case>& p) { return p.param.name; });

}  // namespace
}  // namespace mixprec::kernels
