// The backend tables against the one list of entries (kernels/backend_entries.h): every built-in
// table fills every entry, and every entry has a conformance case (a test of
// AllKernels/BackendConformance named after it), so a kernel added to the list cannot ship
// unfilled or untested.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/backend.h"

namespace mixprec::kernels {
namespace {

std::vector<std::string> entry_names() {
  std::vector<std::string> out;
#define MIXPREC_ENTRY_NAME(entry) out.emplace_back(#entry);
  MIXPREC_KERNEL_ENTRIES(MIXPREC_ENTRY_NAME)
#undef MIXPREC_ENTRY_NAME
  return out;
}

TEST(BackendTable, EveryBuiltInTableFillsEveryEntry) {
  for (const Backend* b : {&cpu_backend(), &ref_backend(), &devsim_backend()}) {
    std::vector<std::string> missing;
#define MIXPREC_CHECK_ENTRY(entry) \
  if (b->entry == nullptr) missing.emplace_back(#entry);
    MIXPREC_KERNEL_ENTRIES(MIXPREC_CHECK_ENTRY)
#undef MIXPREC_CHECK_ENTRY
    EXPECT_TRUE(missing.empty()) << b->name << " leaves " << missing.size()
                                 << " entries empty, the first: " << missing.front();
  }
}

TEST(BackendTable, EveryEntryHasAConformanceCase) {
  // The parameterised conformance suite's case names, e.g. "unary_exp", "batch_norm_forward_eval".
  std::vector<std::string> cases;
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const testing::TestSuite& suite = *unit.GetTestSuite(i);
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

}  // namespace
}  // namespace mixprec::kernels
