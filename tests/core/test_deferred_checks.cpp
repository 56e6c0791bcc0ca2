// The deferred device checks' bookkeeping (core/deferred_checks.h), on host memory standing in
// for the mapped pinned slots a GPU kernel writes.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/deferred_checks.h"

namespace mixprec::detail {
namespace {

TEST(DeferredChecks, RaisesAFailedVerdictAtSettleAndFreesEverySlot) {
  std::vector<std::int64_t> memory(2 * DeferredChecks::kSlots, 7);
  DeferredChecks checks(memory.data());
  std::vector<std::int64_t> seen;
  auto record = [&seen](const std::int64_t* v) {
    seen.push_back(v[0]);
    if (v[0] >= 0) throw std::runtime_error("bad target " + std::to_string(v[1]));
  };
  std::int64_t* ok = checks.claim(record);
  std::int64_t* bad = checks.claim(record);
  ASSERT_NE(ok, nullptr);
  ASSERT_NE(bad, nullptr);
  EXPECT_NE(ok, bad);
  EXPECT_EQ(ok[0], -1);  // preset: "no failure" unless the kernel writes
  EXPECT_EQ(ok[1], 0);
  EXPECT_EQ(checks.pending(), 2u);
  bad[0] = 3;  // the kernel's verdict: row 3 holds target 99
  bad[1] = 99;
  try {
    checks.settle();
    ADD_FAILURE() << "expected the failed check to throw";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "bad target 99");
  }
  EXPECT_EQ(seen, (std::vector<std::int64_t>{-1, 3}));  // both ran, in claim order
  EXPECT_EQ(checks.pending(), 0u);
  checks.settle();  // nothing pending: nothing raised again
}

TEST(DeferredChecks, SaysWhenEverySlotIsPendingUntilSettled) {
  std::vector<std::int64_t> memory(2 * DeferredChecks::kSlots);
  DeferredChecks checks(memory.data());
  int runs = 0;
  for (std::size_t i = 0; i < DeferredChecks::kSlots; ++i) {
    ASSERT_NE(checks.claim([&runs](const std::int64_t*) { ++runs; }), nullptr) << i;
  }
  EXPECT_EQ(checks.claim([](const std::int64_t*) {}), nullptr);
  checks.settle();
  EXPECT_EQ(runs, static_cast<int>(DeferredChecks::kSlots));
  EXPECT_NE(checks.claim([](const std::int64_t*) {}), nullptr);
}

TEST(DeferredChecks, AGraphsSlotIsRaisedAtEverySettleUntilReleased) {
  std::vector<std::int64_t> memory(2 * DeferredChecks::kSlots, 7);
  DeferredChecks checks(memory.data());
  int raised = 0;
  std::int64_t* slot = checks.claim_persistent([&raised](const std::int64_t* v) {
    if (v[0] >= 0) {
      ++raised;
      throw std::runtime_error("bad index");
    }
  });
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot[0], -1);
  EXPECT_EQ(checks.pending(), 0u);  // not one of the per-call checks
  checks.settle();                  // no failure: nothing raised, the slot stays taken
  std::int64_t* other = checks.claim([](const std::int64_t*) {});
  EXPECT_NE(other, slot);
  checks.settle();
  slot[0] = 2;  // a replay's kernel found a bad value
  EXPECT_THROW(checks.settle(), std::runtime_error);
  EXPECT_THROW(checks.settle(), std::runtime_error);  // raised again: the graph still writes it
  EXPECT_EQ(raised, 2);
  checks.release_persistent(slot);
  checks.settle();  // gone
  EXPECT_EQ(raised, 2);
  // Every slot is free again: all kSlots can be claimed.
  for (std::size_t i = 0; i < DeferredChecks::kSlots; ++i) {
    EXPECT_NE(checks.claim([](const std::int64_t*) {}), nullptr) << i;
  }
}

}  // namespace
}  // namespace mixprec::detail
