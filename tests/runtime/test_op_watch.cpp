// OpWatch (runtime/op_watch.h): what the CUDA-graph capture probe uses to name the op during
// which the capture broke. Checked with plain op scopes on the host: a health flag flipped
// between two boundaries is placed between them, an exception names the ops it left.
#include <gtest/gtest.h>

#include <stdexcept>

#include "mixprec/core/error.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/tensor/tensor.h"
#include "runtime/op_scope.h"
#include "runtime/op_watch.h"

namespace mixprec::runtime::detail {
namespace {

TEST(OpWatch, PlacesTheFirstUnhealthyCheckBetweenTwoOpBoundaries) {
  bool ok = true;
  OpWatch watch([&] { return ok; });
  {
    OpScope a(ScopeKind::op, "a");
    { OpScope b(ScopeKind::node, "b"); }
    EXPECT_EQ(watch.open_ops(), "a");
    ok = false;  // in a's own code, after b returned
    { OpScope c(ScopeKind::op, "c"); }
  }
  EXPECT_EQ(watch.first_unhealthy(), "after closing b (a > b), on opening c (a > c)");
  EXPECT_EQ(watch.thrown_in(), "");
  EXPECT_EQ(watch.open_ops(), "");
}

TEST(OpWatch, NamesTheOpsAnExceptionLeft) {
  OpWatch watch([] { return true; });
  try {
    OpScope outer(ScopeKind::op, "outer");
    { OpScope done(ScopeKind::op, "done"); }
    OpScope inner(ScopeKind::cast, "inner");
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(watch.thrown_in(), "outer > inner");
  EXPECT_EQ(watch.first_unhealthy(), "");
}

TEST(OpWatch, HearsRealOpsAndOnlyOnItsThread) {
  int checks = 0;
  {
    OpWatch watch([&] {
      ++checks;
      return true;
    });
    const Tensor x = Tensor::full({4}, 2.0f);
    const Tensor y = x * x;
    EXPECT_GE(checks, 2);  // the op's opening and closing at least
    EXPECT_THROW(OpWatch([] { return true; }), StateError);
  }
  const int before = checks;
  const Tensor z = Tensor::full({4}, 1.0f) * Tensor::full({4}, 3.0f);
  EXPECT_EQ(checks, before) << "a watch that ended still heard ops";
}

}  // namespace
}  // namespace mixprec::runtime::detail
