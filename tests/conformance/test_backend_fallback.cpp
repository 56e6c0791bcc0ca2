// Typed contracts (issue 38): every dtype of every kernel call reaches supports() and the
// fallback. A backend that fills every entry but supports nothing, with a counting copy of the
// reference as its fallback, runs every conformance case through the kernels:: entry points;
// each call must reach the fallback, and supports() and the fallback's verbose line must name
// the call's dtypes, as this file reads them from the arguments (its own list of what each
// descriptor carries). The entries exercised must be the whole list (kernels/backend_entries.h),
// so a new entry cannot go uncovered.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend_scope.h"
#include "conformance/conformance_cases.h"
#include "kernels/backend.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

constexpr std::size_t kEntries = std::size(kEntryNames);

/// What happened to the calls, entry by entry.
struct Log {
  std::mutex mu;
  /// Every supports() question of the refusing backend: the entry and the dtypes it was shown.
  std::vector<std::pair<std::size_t, std::vector<DType>>> asked;
  std::array<int, kEntries> fallback_runs{};  ///< calls the fallback (ref, counted) ran
  std::array<int, kEntries> refused_runs{};   ///< calls the refusing backend ran itself: none
};
Log& calls() {
  static Log l;
  return l;
}

bool supports_nothing(std::size_t entry, std::span<const DType> dtypes) {
  Log& l = calls();
  std::lock_guard<std::mutex> lock(l.mu);
  l.asked.emplace_back(entry, std::vector<DType>(dtypes.begin(), dtypes.end()));
  return false;
}

/// Table entry I: counts the call in `Runs`, then runs the reference kernel Fn.
template <std::size_t I, auto Fn, bool kFallback, class Sig>
struct Counted;
template <std::size_t I, auto Fn, bool kFallback, class R, class... P>
struct Counted<I, Fn, kFallback, R(P...)> {
  static R run(P... args) {
    {
      Log& l = calls();
      std::lock_guard<std::mutex> lock(l.mu);
      ++(kFallback ? l.fallback_runs : l.refused_runs)[I];
    }
    return Fn(std::forward<P>(args)...);
  }
};

/// The reference with every entry counted: the fallback.
const Backend& counting_reference() {
  static const Backend b = [] {
    Backend t{.name = "counting-reference"};
#define MIXPREC_COUNTED_ENTRY(entry) \
  t.entry = &Counted<entry_index(#entry), &ref::entry, true, decltype(ref::entry)>::run;
    MIXPREC_KERNEL_ENTRIES(MIXPREC_COUNTED_ENTRY)
#undef MIXPREC_COUNTED_ENTRY
    return t;
  }();
  return b;
}

/// Fills every entry (so supports() is asked) and supports nothing.
const Backend& refusing() {
  static const Backend b = [] {
    Backend t{.name = "refusing", .supports = &supports_nothing, .fallback = &counting_reference};
#define MIXPREC_REFUSED_ENTRY(entry) \
  t.entry = &Counted<entry_index(#entry), &ref::entry, false, decltype(ref::entry)>::run;
    MIXPREC_KERNEL_ENTRIES(MIXPREC_REFUSED_ENTRY)
#undef MIXPREC_REFUSED_ENTRY
    return t;
  }();
  return b;
}

// ---- the dtypes of a call, as this test reads them (independently of backend.cpp) ----

void distinct(std::vector<DType>& out, std::size_t first, DType t) {
  for (std::size_t i = first; i < out.size(); ++i) {
    if (out[i] == t) return;
  }
  out.push_back(t);
}

template <class T>
void dtypes_of(std::vector<DType>& out, const T& arg) {
  if constexpr (std::is_same_v<T, DType>) {
    out.push_back(arg);
  } else if constexpr (std::is_same_v<T, StridedInput> || std::is_same_v<T, StridedOutput> ||
                       std::is_same_v<T, Pool2dDesc> || std::is_same_v<T, AttentionDesc>) {
    out.push_back(arg.dtype);
  } else if constexpr (std::is_same_v<T, MatmulDesc>) {
    out.push_back(arg.dtype);
    out.push_back(arg.c_dtype);
    if (arg.has_bias) out.push_back(arg.bias_dtype);
  } else if constexpr (std::is_same_v<T, Fp8GemmDesc>) {
    out.push_back(arg.a_dtype);
    out.push_back(arg.b_dtype);
    out.push_back(arg.c_dtype);
    if (arg.has_bias) out.push_back(arg.bias_dtype);
  } else if constexpr (std::is_same_v<T, Conv2dDesc>) {
    out.push_back(arg.dtype);
    if (arg.has_bias) out.push_back(arg.bias_dtype);
  } else if constexpr (std::is_same_v<T, OptimArrays>) {
    out.push_back(arg.param_dtype);
    out.push_back(arg.grad_dtype);
    if (arg.copy != nullptr) out.push_back(arg.copy_dtype);
  } else if constexpr (std::is_same_v<T, SgdBatch> || std::is_same_v<T, AdamBatch>) {
    const std::size_t first = out.size();
    for (int r = 0; r < arg.size; ++r) {
      std::vector<DType> run;
      dtypes_of(run, arg.runs[r].arrays);
      for (DType t : run) distinct(out, first, t);
    }
  } else if constexpr (std::is_same_v<T, ReduceBatch> || std::is_same_v<T, UnscaleBatch>) {
    const std::size_t first = out.size();
    for (int r = 0; r < arg.size; ++r) distinct(out, first, arg.runs[r].dtype);
  } else {
    // Everything else carries no dtype. A new argument type must be placed in one of the
    // branches above or added here, so that no descriptor's dtype goes unchecked.
    static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_pointer_v<T> ||
                      std::is_same_v<T, std::span<const std::int64_t>> ||
                      std::is_same_v<T, BatchNormDims> || std::is_same_v<T, SgdScalars> ||
                      std::is_same_v<T, AdamScalars>,
                  "a kernel argument type this test does not know: say which dtypes it carries");
  }
}

std::string label(const std::vector<DType>& dtypes) {
  std::string s;
  for (std::size_t i = 0; i < dtypes.size(); ++i) s.append(i ? "," : "").append(name(dtypes[i]));
  return s.empty() ? "-" : s;
}

/// What the calls of one case must show, checked after the case.
struct Expected {
  std::size_t entry;
  std::vector<DType> dtypes;
  bool asked = false;        ///< supports() was asked about this call, with these dtypes
  bool reached = false;      ///< the fallback ran it
  std::vector<DType> shown;  ///< what supports() saw (when asked with other dtypes)
};
std::vector<Expected>& expected() {
  static std::vector<Expected> e;
  return e;
}
std::set<std::size_t>& exercised() {
  static std::set<std::size_t> s;
  return s;
}

/// Table entry I of the table the cases are handed: a call through the entry point EP (so the
/// active backend, the refusing one, is asked), recording what that call must show.
template <std::size_t I, const auto& EP, class Sig>
struct Through;
template <std::size_t I, const auto& EP, class R, class... P>
struct Through<I, EP, R(P...)> {
  static R run(P... args) {
    Expected e{};
    e.entry = I;
    (dtypes_of(e.dtypes, static_cast<const std::remove_cvref_t<P>&>(args)), ...);
    Log& l = calls();
    std::size_t asked_before = 0;
    int runs_before = 0;
    {
      std::lock_guard<std::mutex> lock(l.mu);
      asked_before = l.asked.size();
      runs_before = l.fallback_runs[I];
    }
    // Checked when the call returns or throws (a case may expect an error).
    struct Finish {
      Expected& e;
      std::size_t asked_before;
      int runs_before;
      ~Finish() {
        Log& l = calls();
        std::lock_guard<std::mutex> lock(l.mu);
        // The call's own question is the first about I after it started (nested calls of other
        // kernels come after it).
        for (std::size_t k = asked_before; k < l.asked.size(); ++k) {
          if (l.asked[k].first != e.entry) continue;
          e.asked = true;
          e.shown = l.asked[k].second;
          break;
        }
        e.reached = l.fallback_runs[e.entry] > runs_before;
        exercised().insert(e.entry);
        expected().push_back(e);
      }
    };
    Finish finish{e, asked_before, runs_before};
    return EP(std::forward<P>(args)...);
  }
};

/// Hands every call of a case to the kernels:: entry point of the same name.
const Backend& through_entry_points() {
  static const Backend b = [] {
    Backend t{.name = "through-entry-points"};
#define MIXPREC_THROUGH_ENTRY(entry) \
  t.entry = &Through<entry_index(#entry), kernels::entry, decltype(ref::entry)>::run;
    MIXPREC_KERNEL_ENTRIES(MIXPREC_THROUGH_ENTRY)
#undef MIXPREC_THROUGH_ENTRY
    return t;
  }();
  return b;
}

TEST(BackendFallback, EveryCallOfEveryEntryReachesTheFallbackWithItsDtypesNamed) {
  testing::BackendScope use(refusing());
  exercised().clear();
  for (const conformance::Case& c : conformance::cases()) {
    ASSERT_FALSE(c.dtypes.empty()) << c.name;
    const DType t = c.dtypes.front();
    SCOPED_TRACE(c.name + " " + name(t));
    expected().clear();
    set_verbose(true);
    ::testing::internal::CaptureStderr();
    c.run(through_entry_points(), t);
    const std::string verbose = ::testing::internal::GetCapturedStderr();
    set_verbose(false);
    EXPECT_FALSE(expected().empty()) << "the case called no entry through the table it was given";
    for (const Expected& e : expected()) {
      const std::string entry(kEntryNames[e.entry]);
      EXPECT_TRUE(e.reached) << entry << ": the fallback did not run the call";
      ASSERT_TRUE(e.asked) << entry << ": supports() was not asked";
      EXPECT_EQ(label(e.shown), label(e.dtypes)) << entry << ": supports() saw other dtypes";
      // Only random_bits has no dtype at all.
      EXPECT_EQ(e.dtypes.empty(), entry == "random_bits") << entry;
      const std::string line = "mixprec: " + entry + " " + label(e.dtypes) +
                               ": ran reference; skipped: refusing has no " + entry +
                               " kernel for " + label(e.dtypes);
      EXPECT_NE(verbose.find(line), std::string::npos) << "no line '" << line << "'";
    }
  }
  int refused = 0;
  for (int n : calls().refused_runs) refused += n;
  EXPECT_EQ(refused, 0) << "a backend that supports nothing ran a kernel itself";
  // Every entry of the list was called through its entry point by some case.
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < kEntries; ++i) {
    if (exercised().count(i) == 0) missing.emplace_back(kEntryNames[i]);
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " entries never called, the first: "
                               << missing.front();
}

// The dtypes the typed contracts added, named exactly: the optimizer updates (parameter,
// gradient, the 16-bit copy), the unscale kernels and a batch's distinct dtypes, matmul's output
// and bias dtypes, a convolution's bias dtype.
TEST(BackendFallback, OptimizerUnscaleAndGemmCallsNameEveryDtype) {
  testing::BackendScope use(refusing());
  const auto shown = [](auto&& call) {
    Log& l = calls();
    std::size_t before = 0;
    {
      std::lock_guard<std::mutex> lock(l.mu);
      before = l.asked.size();
    }
    call();
    std::lock_guard<std::mutex> lock(l.mu);
    return before < l.asked.size() ? label(l.asked[before].second) : std::string("(not asked)");
  };
  float p[4] = {1, 2, 3, 4}, state[4] = {}, flag = 0.0f;
  std::uint16_t g16[4] = {0x3f80, 0x3f80, 0x3f80, 0x3f80}, copy[4] = {};
  OptimArrays a{};
  a.param = p;
  a.grad = g16;
  a.state0 = state;
  a.param_dtype = DType::f32;
  a.grad_dtype = DType::bf16;
  a.write = kWriteInPlace;
  a.copy = copy;
  a.copy_dtype = DType::f16;
  const SgdScalars sgd{.lr = 0.1f, .momentum = 0.9f, .one_minus_dampening = 1.0f,
                       .weight_decay = 0.0f, .nesterov = 0, .first_step = 1};
  EXPECT_EQ(shown([&] { sgd_update(a, sgd, 4, 0); }), "f32,bf16,f16");
  SgdBatch batch{};
  batch.runs[0] = {a, sgd, 2, 0};
  batch.runs[1] = {a, sgd, 2, 1};
  batch.runs[1].arrays.param = p + 2;
  batch.runs[1].arrays.grad = g16 + 2;
  batch.runs[1].arrays.state0 = state + 2;
  batch.runs[1].arrays.copy = copy + 2;
  batch.runs[1].arrays.copy_dtype = DType::bf16;
  batch.size = 2;
  EXPECT_EQ(shown([&] { sgd_update_batch(batch); }), "f32,bf16,f16");
  EXPECT_EQ(shown([&] { unscale(g16, DType::bf16, 4, 0.5f, &flag, nullptr); }), "bf16");
  UnscaleBatch ub{};
  ub.runs[0] = {p, DType::f32, 4};
  ub.runs[1] = {g16, DType::bf16, 2};
  ub.runs[2] = {g16 + 2, DType::bf16, 2};
  ub.size = 3;
  ub.inv = 1.0f;
  ub.found_inf = &flag;
  EXPECT_EQ(shown([&] { unscale_batch(ub); }), "f32,bf16");
  MatmulDesc m{.m = 2, .n = 2, .k = 1, .dtype = DType::bf16, .c_dtype = DType::f32,
               .has_bias = true, .bias_dtype = DType::f32};
  float c[4] = {};
  EXPECT_EQ(shown([&] { matmul(m, g16, g16, p, c); }), "bf16,f32,f32");
  m.has_bias = false;
  EXPECT_EQ(shown([&] { matmul(m, g16, g16, nullptr, c); }), "bf16,f32");
}

}  // namespace
}  // namespace mixprec::kernels
