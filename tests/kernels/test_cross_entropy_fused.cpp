// The fused cross-entropy kernel against the two it replaces: cross_entropy then
// cross_entropy_backward with the same per-row gradients give the loss and dlogits it writes,
// bit for bit, on the reference and on the cpu backend at every SIMD level this CPU supports, for
// every compute dtype, with and without label smoothing, out of place and in place (dlogits is
// the logits, the losses are the per-row gradients), over rows of awkward widths (1, 7, 1029 and GPT-2's 50257, which crosses the
// 16K-element chunks and, with few rows, is split over threads), rows with NaN or infinite
// logits, and one thread or all. Then its argument errors, and rescale_unless_equal (the fused
// node's backward), which leaves x untouched for equal scalars and multiplies it otherwise.
#include <gtest/gtest.h>

#include <omp.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/softmax.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;

struct Rows {
  std::int64_t rows, cols;
};
const std::vector<Rows> kShapes = {{5, 1}, {9, 7}, {64, 7}, {6, 1029}, {1, 50257}, {3, 50257}};
constexpr DType kDTypes[] = {DType::f32, DType::bf16, DType::f16};

/// The kernels of one backend: the reference's, or the active one's (cpu) through kernels::.
struct Kernels {
  decltype(&ref::cross_entropy) loss;
  decltype(&ref::cross_entropy_backward) backward;
  decltype(&ref::cross_entropy_fused) fused;
};
const Kernels kRef{&ref::cross_entropy, &ref::cross_entropy_backward, &ref::cross_entropy_fused};
Kernels active() {
  return {[](auto... a) { cross_entropy(a...); }, [](auto... a) { cross_entropy_backward(a...); },
          [](auto... a) { cross_entropy_fused(a...); }};
}

/// Logits in [-8, 8] with a NaN in row 1 and +Inf in row 2 when there are enough rows.
Buffer logits_for(DType t, const Rows& s) {
  Buffer x = ktest::random_buffer(t, s.rows * s.cols, -8.0f, 8.0f, 41);
  if (s.rows >= 4) {
    x.set(1 * s.cols + s.cols / 2, std::numeric_limits<float>::quiet_NaN());
    x.set(2 * s.cols, std::numeric_limits<float>::infinity());
  }
  return x;
}

std::vector<std::int64_t> targets_for(const Rows& s) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(s.rows));
  for (std::int64_t r = 0; r < s.rows; ++r) t[r] = (r * 7919 + 3) % s.cols;
  if (s.rows > 1) t[s.rows - 1] = s.cols - 1;  // the last column: the tail of a row
  return t;
}

/// Per-row gradients as a training step gives them (1 / rows, times a scale), one zero.
std::vector<float> grads_for(const Rows& s) {
  std::vector<float> g(static_cast<std::size_t>(s.rows));
  for (std::int64_t r = 0; r < s.rows; ++r) g[r] = 1024.0f / static_cast<float>(s.rows + r);
  if (s.rows > 3) g[3] = 0.0f;
  return g;
}

void expect_same_bits(const Buffer& got, const Buffer& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::int64_t bad = 0, first = -1;
  for (std::int64_t i = 0; i < got.size(); ++i) {
    if (got.bits(i) != want.bits(i)) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements differ, the first at " << first << " ("
                    << (first >= 0 ? got.get(first) : 0.0f) << " vs "
                    << (first >= 0 ? want.get(first) : 0.0f) << ")";
}

/// fused(logits) against cross_entropy + cross_entropy_backward on one backend's kernels.
void check_fused(const Kernels& k, DType in, DType out, const Rows& s, float smoothing,
                 bool in_place, const std::string& where) {
  const std::string what = where + " " + name(in) + "->" + name(out) + " [" +
                           std::to_string(s.rows) + "," + std::to_string(s.cols) + "] s=" +
                           std::to_string(smoothing) + (in_place ? " in place" : "");
  const std::vector<std::int64_t> t = targets_for(s);
  const std::vector<float> g = grads_for(s);
  const std::int64_t n = s.rows * s.cols;
  Buffer x = logits_for(in, s);
  Buffer want_loss(DType::f32, s.rows), want_d(out, n);
  k.loss(x.data(), in, s.rows, s.cols, t.data(), smoothing,
         static_cast<float*>(want_loss.data()));
  k.backward(x.data(), in, s.rows, s.cols, t.data(), smoothing, g.data(), want_d.data(), out);
  // In place: dlogits over the logits and the losses over the per-row gradients.
  Buffer got_loss(DType::f32, s.rows), got_d(out, in_place ? 1 : n);
  for (std::int64_t r = 0; r < s.rows; ++r) got_loss.set(r, in_place ? g[r] : 0.0f);
  void* d = in_place ? x.data() : got_d.data();
  k.fused(x.data(), in, s.rows, s.cols, t.data(), smoothing,
          in_place ? static_cast<const float*>(got_loss.data()) : g.data(),
          static_cast<float*>(got_loss.data()), d, out);
  expect_same_bits(got_loss, want_loss, what + ": loss");
  expect_same_bits(in_place ? x : got_d, want_d, what + ": dlogits");
}

TEST(CrossEntropyFused, ReferenceEqualsTheTwoKernels) {
  for (DType t : kDTypes) {
    for (const Rows& s : kShapes) {
      for (float smoothing : {0.0f, 0.1f}) {
        for (bool in_place : {false, true}) check_fused(kRef, t, t, s, smoothing, in_place, "ref");
      }
    }
  }
  check_fused(kRef, DType::bf16, DType::f32, {6, 1029}, 0.1f, false, "ref");
}

TEST(CrossEntropyFused, CpuEqualsTheTwoKernelsAtEveryIsa) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    const std::string where = std::string("isa=") + name(isa);
    for (DType t : kDTypes) {
      for (const Rows& s : kShapes) {
        for (float smoothing : {0.0f, 0.1f}) {
          for (bool in_place : {false, true}) {
            check_fused(active(), t, t, s, smoothing, in_place, where);
          }
        }
      }
    }
    // 16-bit logits, f32 gradient (out of place only: in place needs one dtype).
    check_fused(active(), DType::bf16, DType::f32, {6, 1029}, 0.1f, false, where);
    check_fused(active(), DType::f16, DType::f32, {3, 50257}, 0.0f, false, where);
  }
}

// Rows on one thread and rows split over threads (few long rows) are different schedules of
// the same passes: the fused kernel must agree with the separate ones under both.
TEST(CrossEntropyFused, CpuEqualsTheTwoKernelsOnOneThread) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  for (DType t : kDTypes) {
    for (bool in_place : {false, true}) {
      check_fused(active(), t, t, {3, 50257}, 0.1f, in_place, "1 thread");
    }
  }
  omp_set_num_threads(threads);
}

using HostArray3 = std::array<float, 3>;

TEST(CrossEntropyFused, ArgumentErrors) {
  Buffer x(DType::f32, 6), d(DType::bf16, 6);
  Buffer loss(DType::f32, 2);
  const std::int64_t good[] = {0, 2}, bad[] = {0, 3};
  const float g[] = {0.5f, 0.5f};
  auto* l = static_cast<float*>(loss.data());
  const auto expect_error = [](auto call, const std::string& part) {
    try {
      call();
      ADD_FAILURE() << "no error for " << part;
    } catch (const ValueError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("cross_entropy_fused:", 0), 0u) << m;
      EXPECT_NE(m.find(part), std::string::npos) << m;
    }
  };
  for (const Kernels& k : {kRef, active()}) {
    expect_error([&] { k.fused(x.data(), DType::f32, 2, 3, bad, 0.0f, g, l, d.data(), DType::f32); },
                 "out of range");
    expect_error([&] { k.fused(x.data(), DType::f32, 2, 3, good, 0.0f, g, l, x.data(), DType::bf16); },
                 "one dtype");
    // dlogits starting one element into the logits: neither in place nor disjoint.
    expect_error([&] {
      k.fused(x.data(), DType::f32, 1, 3, good, 0.0f, g, l, static_cast<float*>(x.data()) + 1,
              DType::f32);
    }, "dlogits overlaps");
    // The losses one element into the gradients.
    HostArray3 gl{0.5f, 0.5f, 0.5f};
    expect_error([&] {
      k.fused(x.data(), DType::f32, 2, 3, good, 0.0f, gl.data(), gl.data() + 1, d.data(),
              DType::bf16);
    }, "loss_per_row overlaps");
  }
}

TEST(RescaleUnlessEqual, EqualScalarsLeaveXAsItIs) {
  for (DType t : kDTypes) {
    Buffer x = ktest::random_buffer(t, 1029, -4.0f, 4.0f, 43);
    x.set(5, std::numeric_limits<float>::quiet_NaN());
    const Buffer before = x;
    const float num = 0.125f, den = 0.125f;
    ktest::HostArray<float> n(1, num), dd(1, den);
    rescale_unless_equal(x.data(), t, x.size(), n.data(), dd.data());
    expect_same_bits(x, before, std::string("equal ") + name(t));
  }
}

TEST(RescaleUnlessEqual, OtherScalarsMultiplyOnceRounded) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType t : kDTypes) {
      // A gradient of zero (x becomes signed zeros) and one whose f16 products overflow.
      for (auto [num, den] : {std::pair{0.7f, 0.375f}, std::pair{0.0f, 0.5f},
                              std::pair{3.0f, 1e-30f}}) {
        Buffer x = ktest::random_buffer(t, 70001, -4.0f, 4.0f, 44);
        x.set(7, -0.0f);
        Buffer want = x;
        ktest::HostArray<float> n(1, num), dd(1, den);
        const float ratio = num / den;
        for (std::int64_t i = 0; i < want.size(); ++i) want.set(i, want.get(i) * ratio);
        Buffer ref_out = x;
        ref::rescale_unless_equal(ref_out.data(), t, x.size(), n.data(), dd.data());
        rescale_unless_equal(x.data(), t, x.size(), n.data(), dd.data());
        const std::string what = std::string(name(t)) + " ratio " + std::to_string(ratio) +
                                 " isa=" + name(isa);
        expect_same_bits(ref_out, want, "ref " + what);
        expect_same_bits(x, want, "cpu " + what);
      }
    }
  }
}

}  // namespace
}  // namespace mixprec::kernels
