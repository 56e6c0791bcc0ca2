// The backend tables against the one list of entries (kernels/backend_entries.h): every built-in
// table fills every entry, and every entry has a conformance case (a test of
// AllKernels/BackendConformance named after it), so a kernel added to the list cannot ship
// unfilled or untested.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend_scope.h"
#include "kernels/backend.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

std::vector<std::string> entry_names() {
  std::vector<std::string> out;
#define MIXPREC_ENTRY_NAME(entry) out.emplace_back(#entry);
  MIXPREC_KERNEL_ENTRIES(MIXPREC_ENTRY_NAME)
#undef MIXPREC_ENTRY_NAME
  return out;
}

// Every entry runs somewhere on every built-in backend: in its own table, or in its fallback's.
TEST(BackendTable, EveryBuiltInTableFillsEveryEntry) {
  for (const Backend* b : {&cpu_backend(), &ref_backend(), &devsim_backend()}) {
    std::vector<std::string> missing;
    const Backend* fb = b->fallback != nullptr ? &b->fallback() : nullptr;
#define MIXPREC_CHECK_ENTRY(entry) \
  if (b->entry == nullptr && (fb == nullptr || fb->entry == nullptr)) missing.emplace_back(#entry);
    MIXPREC_KERNEL_ENTRIES(MIXPREC_CHECK_ENTRY)
#undef MIXPREC_CHECK_ENTRY
    EXPECT_TRUE(missing.empty()) << b->name << " leaves " << missing.size()
                                 << " entries empty, the first: " << missing.front();
  }
}

TEST(BackendTable, EveryEntryHasAConformanceCase) {
  // The parameterised conformance suite's case names, e.g. "unary_exp", "batch_norm_forward_eval".
  std::vector<std::string> cases;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    if (std::string(suite.name()) != "AllKernels/BackendConformance") continue;
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const std::string test = suite.GetTestInfo(j)->name();
      cases.push_back(test.substr(test.find('/') + 1));
    }
  }
  ASSERT_FALSE(cases.empty()) << "the conformance suite is not in this test binary";
  for (const std::string& entry : entry_names()) {
    bool found = false;
    for (const std::string& c : cases) found = found || c == entry || c.rfind(entry + "_", 0) == 0;
    EXPECT_TRUE(found) << "no conformance case for the backend entry '" << entry
                       << "' (name a case after it in test_backend_conformance.cpp)";
  }
}

/// A backend with one kernel (fill, f32 only), to exercise the one fallback mechanism.
bool f32_only(std::size_t, std::span<const DType> dtypes) {
  for (DType t : dtypes) {
    if (t != DType::f32) return false;
  }
  return true;
}
void fill_with_sevens(void* out, DType, std::int64_t n, float) {
  for (std::int64_t i = 0; i < n; ++i) static_cast<float*>(out)[i] = 7.0f;
}

TEST(BackendFallback, AnUnsupportedDtypeOrAMissingEntryRunsTheFallbackAndSaysSo) {
  const Backend partial{.name = "partial", .supports = &f32_only, .fallback = &ref_backend,
                        .fill = &fill_with_sevens};
  testing::BackendScope use(partial);
  float f[3];
  fill(f, DType::f32, 3, 1.0f);  // supported: the backend's own kernel
  EXPECT_EQ(f[2], 7.0f);
  set_verbose(true);
  ::testing::internal::CaptureStderr();
  bfloat16 h[3];
  fill(h, DType::bf16, 3, 1.0f);  // a dtype it does not support: the reference
  const float src[2] = {1.5f, -2.0f};
  float dst[2];
  convert(src, DType::f32, dst, DType::f32, 2);  // an entry it lacks: the reference
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_verbose(false);
  EXPECT_EQ(static_cast<float>(h[2]), 1.0f);
  EXPECT_EQ(dst[1], -2.0f);
  EXPECT_NE(log.find("mixprec: fill bf16: ran reference; skipped: partial has no fill kernel for "
                     "bf16"), std::string::npos) << log;
  EXPECT_NE(log.find("mixprec: convert f32,f32: ran reference; skipped: partial has no convert "
                     "kernel"), std::string::npos) << log;
}

TEST(BackendFallback, WithoutAFallbackTheErrorNamesKernelDtypeAndBackend) {
  const Backend lonely{.name = "lonely", .supports = &f32_only, .fill = &fill_with_sevens};
  testing::BackendScope use(lonely);
  bfloat16 h[3];
  try {
    fill(h, DType::bf16, 3, 1.0f);
    ADD_FAILURE() << "expected a BackendError";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("fill: lonely has no fill kernel for bf16 and no "
                                         "fallback"), std::string::npos) << e.what();
  }
  float f[1];
  EXPECT_THROW(copy({}, {f, DType::f32, {}}, {f, DType::f32, {}}), BackendError);  // not filled
}

// On the cpu backend an fp8 call of a computing kernel runs the reference, logged, which refuses
// it with the op's name; a conversion of fp8 stays on the cpu kernels.
TEST(BackendFallback, CpuSendsFp8ComputeToTheReference) {
  testing::BackendScope use(cpu_backend());
  std::uint8_t f8[4] = {};
  const std::int64_t shape[] = {4}, one[] = {1};
  set_verbose(true);
  ::testing::internal::CaptureStderr();
  EXPECT_THROW(unary(UnaryOp::neg, shape, {f8, DType::f8e4m3, one}, f8, DType::f8e4m3),
               DTypeError);
  float wide[4];
  convert(f8, DType::f8e4m3, wide, DType::f32, 4);
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_verbose(false);
  EXPECT_NE(log.find("mixprec: unary f8e4m3,f8e4m3: ran reference; skipped: cpu has no unary "
                     "kernel for f8e4m3,f8e4m3"), std::string::npos) << log;
  EXPECT_EQ(log.find("convert f8e4m3,f32: ran reference"), std::string::npos) << log;
}

// The cuda table (partial until issue 25 is done): a kernel it lacks is one BackendError naming
// kernel, dtypes and backend, raised before any memory is touched, on every machine.
TEST(BackendFallback, TheCudaTableRefusesWhatItDoesNotSupportByName) {
  const Backend& cuda = cuda_backend();
  EXPECT_EQ(cuda.fallback, nullptr);  // the reference cannot read device memory
  // A CUDA build fills every entry; a build without CUDA none (--device refuses cuda there).
  int filled = 0, entries = 0;
#define MIXPREC_COUNT_FILLED(entry) \
  ++entries;                        \
  filled += cuda.entry != nullptr ? 1 : 0;
  MIXPREC_KERNEL_ENTRIES(MIXPREC_COUNT_FILLED)
#undef MIXPREC_COUNT_FILLED
  EXPECT_EQ(filled, MIXPREC_TESTS_CUDA ? entries : 0);

  // fp8 is storage only: conversions and copies take it, computing kernels are refused it by
  // name before they could misread its bytes as f32.
  const DType fp8[] = {DType::f8e4m3, DType::f8e4m3};
  const DType to_fp8[] = {DType::f32, DType::f8e5m2};
  EXPECT_FALSE(cuda.supports(entry_index("unary"), std::span<const DType>(fp8)));
  EXPECT_FALSE(cuda.supports(entry_index("matmul"), std::span<const DType>(fp8)));
  EXPECT_TRUE(cuda.supports(entry_index("convert"), std::span<const DType>(to_fp8)));
  EXPECT_TRUE(cuda.supports(entry_index("copy"), std::span<const DType>(fp8)));
  testing::BackendScope use(cuda);
  std::uint8_t x[4] = {}, y[4] = {};
  const std::int64_t shape[] = {4}, strides[] = {1};
  try {
    unary(UnaryOp::neg, shape, {x, DType::f8e4m3, strides}, y, DType::f8e4m3);
    ADD_FAILURE() << "expected a BackendError";
  } catch (const BackendError& e) {
    // A CUDA build has the kernel and refuses the dtype; a build without CUDA has no kernel.
    const std::string want = MIXPREC_TESTS_CUDA ? "unary: cuda has no unary kernel for f8e4m3,f8e4m3"
                                                : "unary: cuda has no unary kernel and no fallback";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

// Host arrays (data sets, the public conversions of raw arrays) must never reach a device
// table: under cuda they run on the cpu kernels, under devsim on the reference. (The first GPU
// run found host conversions handed to cudaMemcpy as device addresses.)
TEST(BackendFallback, HostArraysRunOnAHostTableUnderEveryBackend) {
  {
    testing::BackendScope use(cuda_backend());
    EXPECT_EQ(&host_backend(), &cpu_backend());
  }
  {
    testing::BackendScope use(devsim_backend());
    EXPECT_EQ(&host_backend(), &ref_backend());
  }
  for (const Backend* host : {&cpu_backend(), &ref_backend()}) {
    testing::BackendScope use(*host);
    EXPECT_EQ(&host_backend(), host);
  }
}

}  // namespace
}  // namespace mixprec::kernels
