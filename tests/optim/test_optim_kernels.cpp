// The fused update kernels: the cpu backend (Highway, every target this CPU has) against the
// scalar reference bit for bit over every write mode, dtype pair and optimizer option; the
// verbose log; then the optimizers' numerical behaviour: fp32 masters keeping tiny updates that
// 16-bit parameters alone would lose, and stochastic rounding without masters.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cpu_class_expect.h"
#include "kernels/kernel_test_util.h"
#include "kernels/optim.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/half.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/core/verbose.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::kernels {
namespace {

using ktest::IsaCap;
using ktest::isas_to_test;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// One tensor's worth of kernel arrays: raw parameter/gradient bytes, master and state.
struct Arrays {
  DType param_dtype = DType::f32;
  DType grad_dtype = DType::f32;
  int write = kWriteInPlace;
  std::vector<std::uint8_t> param, grad;
  std::vector<float> master, state0, state1;

  OptimArrays view() {
    OptimArrays a{};
    a.param = param.data();
    a.grad = grad.data();
    a.master = master.empty() ? nullptr : master.data();
    a.state0 = state0.empty() ? nullptr : state0.data();
    a.state1 = state1.empty() ? nullptr : state1.data();
    a.param_dtype = param_dtype;
    a.grad_dtype = grad_dtype;
    a.write = write;
    return a;
  }
  // Bit for bit, except the sign of a NaN: IEEE 754 leaves it unspecified, and on AArch64 an
  // fma whose negated operand the compiler chose differently (FMSUB vs FNMSUB) flips it. The
  // payload must still match.
  bool operator==(const Arrays& o) const {
    const auto same_f32 = [](const std::vector<float>& x, const std::vector<float>& y) {
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        std::uint32_t a = 0, b = 0;
        std::memcpy(&a, &x[i], 4);
        std::memcpy(&b, &y[i], 4);
        if (!same_bits(a, b, 0x80000000u, 0x7f800000u)) return false;
      }
      return true;
    };
    if (param.size() != o.param.size()) return false;
    const std::size_t size = param_dtype == DType::f32 ? 4 : 2;
    const std::uint32_t sign = size == 4 ? 0x80000000u : 0x8000u;
    const std::uint32_t inf = size == 4                    ? 0x7f800000u
                              : param_dtype == DType::bf16 ? 0x7f80u
                                                           : 0x7c00u;
    for (std::size_t i = 0; i < param.size(); i += size) {
      std::uint32_t a = 0, b = 0;
      std::memcpy(&a, param.data() + i, size);
      std::memcpy(&b, o.param.data() + i, size);
      if (!same_bits(a, b, sign, inf)) return false;
    }
    return same_f32(master, o.master) && same_f32(state0, o.state0) &&
           same_f32(state1, o.state1);
  }
  /// Equal bits, or two NaNs (exponent all ones, mantissa non-zero) that differ in sign only.
  static bool same_bits(std::uint32_t a, std::uint32_t b, std::uint32_t sign, std::uint32_t inf) {
    if (a == b) return true;
    const bool a_nan = (a & ~sign) > inf, b_nan = (b & ~sign) > inf;
    return a_nan && b_nan && (a & ~sign) == (b & ~sign);
  }
};

std::size_t elem_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

/// value rounded to nearest even and stored as element i of a dtype byte buffer.
void put(std::vector<std::uint8_t>& bytes, DType dtype, std::size_t i, float value) {
  if (dtype == DType::f32) {
    std::memcpy(bytes.data() + 4 * i, &value, 4);
    return;
  }
  const std::uint16_t h = dtype == DType::bf16 ? f32_to_bf16_bits(value) : f32_to_f16_bits(value);
  std::memcpy(bytes.data() + 2 * i, &h, 2);
}

/// A cheap deterministic value in [-2, 2) for (i, salt).
float unit(std::size_t i, std::uint64_t salt) {
  std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (salt * 0xBF58476D1CE4E5B9ull);
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<float>(x >> 40) * 0x1p-24f * 4.0f - 2.0f;
}

/// Initial parameters: ordinary values, zeros of both signs, f16-subnormal and bf16-only tiny
/// magnitudes, and values next to the f16 maximum whose update overflows it.
float param_value(std::size_t i) {
  const float u = unit(i, 1);
  if (i % 13 == 5) return 0.0f;
  if (i % 19 == 6) return -0.0f;
  if (i % 11 == 3) return u * 1e-6f;
  if (i % 23 == 8) return u * 1e-30f;
  if (i % 17 == 4) return std::copysign(65400.0f, u);
  return u;
}

/// The gradient of element i at step t (1-based). Every element meets at most one non-finite
/// gradient over the three steps (NaN, -NaN, +Inf or -Inf), so a NaN result always descends
/// from a single NaN: when two NaNs with different payloads meet in one fma, IEEE 754 lets the
/// implementation return either, and the compiler's choice of fma operand order decides.
float grad_value(std::size_t i, int t) {
  const float u = unit(i, 10 + static_cast<std::uint64_t>(t));
  const std::size_t k = i % 61;
  if (k == static_cast<std::size_t>(10 + t)) return kNaN;
  if (k == static_cast<std::size_t>(20 + t)) return -kNaN;
  if (k == static_cast<std::size_t>(30 + t)) return kInf;
  if (k == static_cast<std::size_t>(40 + t)) return -kInf;
  if (i % 13 == 5) return 0.0f;
  if (i % 7 == 2) return u * 1e-6f;
  if (i % 29 == 3) return u * 3e4f;
  return u;
}

struct WriteConfig {
  const char* label;
  DType param_dtype;
  int write;
};
const WriteConfig kWrites[] = {
    {"f32 in place", DType::f32, kWriteInPlace},
    {"bf16 master", DType::bf16, kWriteMaster},
    {"f16 master", DType::f16, kWriteMaster},
    {"bf16 stochastic", DType::bf16, kWriteStochastic},
    {"f16 stochastic", DType::f16, kWriteStochastic},
};
const DType kGradDTypes[] = {DType::f32, DType::bf16, DType::f16};
const char* dtype_name(DType d) { return d == DType::f32 ? "f32" : d == DType::bf16 ? "bf16" : "f16"; }

/// Fresh arrays of n elements for a write configuration (states as the optimizer needs them).
Arrays make_arrays(std::size_t n, const WriteConfig& w, DType grad_dtype, bool state0, bool state1) {
  Arrays a;
  a.param_dtype = w.param_dtype;
  a.grad_dtype = grad_dtype;
  a.write = w.write;
  a.param.assign((n + 1) * elem_size(w.param_dtype), 0x5a);
  a.grad.assign((n + 1) * elem_size(grad_dtype), 0);
  for (std::size_t i = 0; i < n; ++i) put(a.param, w.param_dtype, i, param_value(i));
  // One guard element past the end of every array (compared too: a write past n would show).
  if (w.write == kWriteMaster) {
    a.master.resize(n + 1, 7.0f);
    for (std::size_t i = 0; i < n; ++i) a.master[i] = param_value(i);
  }
  if (state0) a.state0.assign(n + 1, 0.0f);
  if (state1) a.state1.assign(n + 1, 0.0f);
  return a;
}

void set_grads(Arrays& a, std::size_t n, int t) {
  for (std::size_t i = 0; i < n; ++i) put(a.grad, a.grad_dtype, i, grad_value(i, t));
}

struct SgdVariant {
  const char* label;
  float momentum, dampening, weight_decay;
  bool nesterov;
};
// Every valid combination: no momentum (with and without weight decay), momentum with and
// without dampening, Nesterov (dampening 0).
const SgdVariant kSgdVariants[] = {
    {"plain", 0.0f, 0.0f, 0.0f, false},     {"wd", 0.0f, 0.0f, 0.01f, false},
    {"momentum", 0.9f, 0.0f, 0.0f, false},  {"momentum wd", 0.9f, 0.0f, 0.01f, false},
    {"dampening", 0.5f, 0.25f, 0.0f, false}, {"dampening wd", 0.5f, 0.25f, 0.01f, false},
    {"nesterov", 0.9f, 0.0f, 0.0f, true},   {"nesterov wd", 0.9f, 0.0f, 0.01f, true},
};

SgdScalars sgd_scalars(const SgdVariant& v, int t) {
  SgdScalars s{};
  s.lr = 0.1f;
  s.momentum = v.momentum;
  s.one_minus_dampening = static_cast<float>(1.0 - static_cast<double>(v.dampening));
  s.weight_decay = v.weight_decay;
  s.nesterov = v.nesterov ? 1 : 0;
  s.first_step = t == 1 ? 1 : 0;
  return s;
}

struct AdamVariant {
  const char* label;
  float weight_decay;
  bool decoupled;
};
const AdamVariant kAdamVariants[] = {
    {"Adam", 0.0f, false}, {"Adam L2", 0.1f, false}, {"AdamW", 0.1f, true}};

/// The scalars as Adam::update computes them (double, rounded once).
AdamScalars adam_scalars(const AdamVariant& v, int t) {
  const double lr = 0.01, beta1 = 0.9f, beta2 = 0.999f;
  AdamScalars s{};
  s.beta1 = 0.9f;
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = 0.999f;
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.eps = 1e-8f;
  s.l2_weight_decay = v.decoupled ? 0.0f : v.weight_decay;
  s.decay = v.decoupled ? static_cast<float>(1.0 - lr * v.weight_decay) : 1.0f;
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  s.inv_sqrt_bias_correction2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(beta2, t)));
  return s;
}

using SgdFn = void (*)(const OptimArrays&, const SgdScalars&, std::size_t, std::uint64_t);
using AdamFn = void (*)(const OptimArrays&, const AdamScalars&, std::size_t, std::uint64_t);

/// Three steps (the first initialises the momentum buffer) through `update`.
template <class Fn, class MakeScalars>
Arrays three_steps(Arrays a, std::size_t n, Fn update, MakeScalars scalars) {
  for (int t = 1; t <= 3; ++t) {
    set_grads(a, n, t);
    update(a.view(), scalars(t), n, 1000 + static_cast<std::uint64_t>(t));
  }
  return a;
}

// Sizes: empty, single, around 4/8/16-lane vectors (bodies and tails), and one above the
// parallel threshold (32K) with a partial last chunk and a tail.
const std::size_t kSizes[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 40007};

// Bit-exact, not 1 ulp: every target runs the same sequence of IEEE operations (fma, mul, div,
// sqrt), each correctly rounded (std::fma lane by lane where Highway's MulAdd is not fused), and
// the 16-bit writes use the same integer rounding; any difference is a bug.
TEST(OptimKernels, SgdEveryTargetMatchesReferenceBitForBit) {
  for (const WriteConfig& w : kWrites) {
    for (const DType grad : kGradDTypes) {
      for (const SgdVariant& v : kSgdVariants) {
        for (const std::size_t n : kSizes) {
          const auto scalars = [&](int t) { return sgd_scalars(v, t); };
          const Arrays start = make_arrays(n, w, grad, v.momentum != 0.0f, false);
          const Arrays want = three_steps(start, n, static_cast<SgdFn>(&ref::sgd_update), scalars);
          for (const Isa isa : isas_to_test()) {
            IsaCap cap(isa);
            const Arrays got = three_steps(start, n, static_cast<SgdFn>(&cpu::sgd_update), scalars);
            EXPECT_TRUE(got == want) << "SGD " << v.label << ", " << w.label << ", grad "
                                     << dtype_name(grad) << ", n " << n << ", " << name(isa)
                                     << " (" << simd_target() << ")";
          }
        }
      }
    }
  }
}

TEST(OptimKernels, AdamEveryTargetMatchesReferenceBitForBit) {
  for (const WriteConfig& w : kWrites) {
    for (const DType grad : kGradDTypes) {
      for (const AdamVariant& v : kAdamVariants) {
        for (const std::size_t n : kSizes) {
          const auto scalars = [&](int t) { return adam_scalars(v, t); };
          const Arrays start = make_arrays(n, w, grad, true, true);
          const Arrays want = three_steps(start, n, static_cast<AdamFn>(&ref::adam_update), scalars);
          for (const Isa isa : isas_to_test()) {
            IsaCap cap(isa);
            const Arrays got = three_steps(start, n, static_cast<AdamFn>(&cpu::adam_update), scalars);
            EXPECT_TRUE(got == want) << v.label << ", " << w.label << ", grad " << dtype_name(grad)
                                     << ", n " << n << ", " << name(isa) << " ("
                                     << simd_target() << ")";
          }
        }
      }
    }
  }
}

// The 16-bit reads and writes over (nearly) every pattern: an SGD step with lr 1 from a zero
// parameter writes exactly -g, so the parameter receives every f32 value below (all 2^16 top
// halves with low halves at the rounding boundaries, so ties, overflow to Inf, f16 subnormals,
// f32 subnormals and NaN payloads all occur) through round-to-nearest-even (with master) and
// stochastic rounding; and f32 parameters receive every bf16/f16 gradient widened.
TEST(OptimKernels, SixteenBitRoundingAndWideningMatchReferenceForEveryPattern) {
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x7fff, 0x8000, 0x8001, 0xffff};
  std::vector<float> values;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (const std::uint32_t lo : lows) values.push_back(std::bit_cast<float>(hi << 16 | lo));
  }
  const std::size_t n = values.size();
  SgdScalars s{};
  s.lr = 1.0f;
  s.one_minus_dampening = 1.0f;
  for (const WriteConfig& w : kWrites) {
    if (w.param_dtype == DType::f32) continue;
    Arrays start;
    start.param_dtype = w.param_dtype;
    start.grad_dtype = DType::f32;
    start.write = w.write;
    start.param.assign(2 * n, 0);
    start.grad.resize(4 * n);
    for (std::size_t i = 0; i < n; ++i) {
      const float g = -values[i];
      std::memcpy(start.grad.data() + 4 * i, &g, 4);
    }
    if (w.write == kWriteMaster) start.master.assign(n, 0.0f);
    Arrays want = start;
    ref::sgd_update(want.view(), s, n, 77);
    for (const Isa isa : isas_to_test()) {
      IsaCap cap(isa);
      Arrays got = start;
      cpu::sgd_update(got.view(), s, n, 77);
      EXPECT_TRUE(got == want) << w.label << ", " << name(isa) << " (" << simd_target() << ")";
    }
  }
  for (const DType grad : {DType::bf16, DType::f16}) {
    Arrays start;
    start.grad_dtype = grad;
    start.param.assign(4 * 0x10000, 0);
    start.grad.resize(2 * 0x10000);
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
      const auto bits = static_cast<std::uint16_t>(h);
      std::memcpy(start.grad.data() + 2 * h, &bits, 2);
    }
    Arrays want = start;
    ref::sgd_update(want.view(), s, 0x10000, 0);
    for (const Isa isa : isas_to_test()) {
      IsaCap cap(isa);
      Arrays got = start;
      cpu::sgd_update(got.view(), s, 0x10000, 0);
      EXPECT_TRUE(got == want) << "grad " << dtype_name(grad) << ", " << name(isa);
    }
  }
}

/// Element i of a dtype byte buffer, widened to f32.
float get(const std::vector<std::uint8_t>& bytes, DType dtype, std::size_t i) {
  if (dtype == DType::f32) {
    float v = 0;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  std::uint16_t h = 0;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return dtype == DType::bf16 ? bf16_bits_to_f32(h) : f16_bits_to_f32(h);
}

// A gradient multiplier m (the clipping coefficient folded into the update) gives the bits of
// multiplying the gradient first in a pass of its own (widen, one f32 product, round to the
// gradient's dtype) and then updating, and leaves the gradient as it was: for every write mode
// and gradient dtype; for m = 1, an ordinary factor, one that flushes small gradients to zero
// and one that overflows 16-bit gradients to Inf; on the reference and on every target.
TEST(OptimKernels, GradMultiplierMatchesScalingTheGradientFirst) {
  const std::size_t n = 40007;
  const AdamScalars s = adam_scalars(kAdamVariants[2], 2);
  for (const WriteConfig& w : kWrites) {
    for (const DType grad : kGradDTypes) {
      for (const float m : {1.0f, 0.3f, 1e-30f, 3e4f}) {
        Arrays start = make_arrays(n, w, grad, true, true);
        set_grads(start, n, 2);
        Arrays scaled_first = start;
        for (std::size_t i = 0; i < n; ++i) put(scaled_first.grad, grad, i, get(start.grad, grad, i) * m);
        ref::adam_update(scaled_first.view(), s, n, 5);
        const std::string what = std::string(w.label) + ", grad " + dtype_name(grad) +
                                 ", m " + std::to_string(m);
        Arrays got = start;
        OptimArrays a = got.view();
        a.grad_multiplier = &m;
        ref::adam_update(a, s, n, 5);
        EXPECT_TRUE(got == scaled_first) << "reference, " << what;
        EXPECT_EQ(got.grad, start.grad) << "the gradient was written, " << what;
        for (const Isa isa : isas_to_test()) {
          IsaCap cap(isa);
          Arrays simd = start;
          OptimArrays b = simd.view();
          b.grad_multiplier = &m;
          cpu::adam_update(b, s, n, 5);
          EXPECT_TRUE(simd == scaled_first) << name(isa) << " (" << simd_target() << "), " << what;
          EXPECT_EQ(simd.grad, start.grad) << name(isa) << ", " << what;
        }
      }
    }
  }
}

// The multi-tensor entries update every run of a batch exactly as the single-tensor entry
// updates it alone (the same bits), on the reference and on every target, whatever the batch
// mixes: write modes, gradient dtypes, sizes from 0 to several chunks, per-run scalars (each its
// own step), RNG streams, multipliers and a 16-bit copy; and they touch nothing else (the guard
// element past each run's end is compared too).
TEST(OptimKernels, BatchUpdatesEveryRunAsTheSingleTensorEntryDoes) {
  struct RunCase {
    const WriteConfig* w;
    DType grad;
    int t;
    std::size_t n;
  };
  std::vector<RunCase> cases;
  const std::size_t sizes[] = {40007, 0, 1, 17, 33, 16384, 5, 70001};
  for (const WriteConfig& w : kWrites) {
    for (const DType grad : kGradDTypes) {
      const std::size_t k = cases.size();
      cases.push_back({&w, grad, 1 + static_cast<int>(k % 3), sizes[k % std::size(sizes)]});
    }
  }
  const float multiplier = 0.75f;
  const auto multiplied = [](std::size_t k) { return k % 4 == 3; };
  for (const bool adam : {false, true}) {
    std::vector<Arrays> start;
    for (const RunCase& c : cases) {
      start.push_back(make_arrays(c.n, *c.w, c.grad, true, adam));
      set_grads(start.back(), c.n, c.t);
    }
    const SgdVariant& sgd = kSgdVariants[7];  // Nesterov with weight decay
    const AdamVariant& adamw = kAdamVariants[2];
    // Each run alone, through the single-tensor reference entry.
    std::vector<Arrays> want = start;
    for (std::size_t k = 0; k < cases.size(); ++k) {
      OptimArrays a = want[k].view();
      if (multiplied(k)) a.grad_multiplier = &multiplier;
      const std::uint64_t stream = 900 + k;
      if (adam) {
        ref::adam_update(a, adam_scalars(adamw, cases[k].t), cases[k].n, stream);
      } else {
        ref::sgd_update(a, sgd_scalars(sgd, cases[k].t), cases[k].n, stream);
      }
    }
    // Every run of `got` into one batch, each with its scalars, multiplier and stream.
    const auto fill = [&](auto& batch, std::vector<Arrays>& got, auto scalars_of) {
      for (std::size_t k = 0; k < cases.size(); ++k) {
        auto& run = batch.runs[batch.size++];
        run.arrays = got[k].view();
        if (multiplied(k)) run.arrays.grad_multiplier = &multiplier;
        run.scalars = scalars_of(cases[k].t);
        run.count = cases[k].n;
        run.rng_stream = 900 + k;
      }
    };
    const auto batched = [&](auto entry) {
      std::vector<Arrays> got = start;
      if (adam) {
        auto batch = std::make_unique<AdamBatch>();
        fill(*batch, got, [&](int t) { return adam_scalars(adamw, t); });
        entry.adam(*batch);
      } else {
        auto batch = std::make_unique<SgdBatch>();
        fill(*batch, got, [&](int t) { return sgd_scalars(sgd, t); });
        entry.sgd(*batch);
      }
      return got;
    };
    struct Entries {
      void (*sgd)(const SgdBatch&);
      void (*adam)(const AdamBatch&);
    };
    const auto compare = [&](const std::vector<Arrays>& got, const std::string& where) {
      for (std::size_t k = 0; k < cases.size(); ++k) {
        EXPECT_TRUE(got[k] == want[k]) << where << ", " << (adam ? "AdamW" : "SGD") << " run " << k
                                       << ": " << cases[k].w->label << ", grad "
                                       << dtype_name(cases[k].grad) << ", n " << cases[k].n;
      }
    };
    compare(batched(Entries{&ref::sgd_update_batch, &ref::adam_update_batch}), "reference");
    for (const Isa isa : isas_to_test()) {
      IsaCap cap(isa);
      compare(batched(Entries{&cpu::sgd_update_batch, &cpu::adam_update_batch}),
              std::string(name(isa)) + " (" + simd_target() + ")");
    }
  }
}

TEST(OptimKernels, VerboseNamesTheTargetThatRan) {
  std::set<std::string> targets;
  for (const Isa isa : isas_to_test()) {
    IsaCap cap(isa);
    Tensor p = Tensor::from_vector({1.0f, 2.0f, 3.0f}, {3}, DType::bf16);
    p.set_requires_grad();
    optim::Adam opt({p});
    p.set_grad(Tensor::from_vector({0.5f, 0.5f, 0.5f}, {3}, DType::f16));
    const bool was = verbose_enabled();
    set_verbose(true);
    testing::internal::CaptureStderr();
    opt.step();
    const std::string log = testing::internal::GetCapturedStderr();
    set_verbose(was);
    const std::string want =
        std::string("mixprec: adam bf16 (grad f16, fp32 master): ran ") + simd_target();
    EXPECT_NE(log.find(want), std::string::npos) << log;
    EXPECT_TRUE(target_matches(ctest::expected_target(isa), simd_target()))
        << name(isa) << " ran " << simd_target() << ", the CPU class table says "
        << ctest::expected_target(isa);
    targets.insert(simd_target());
  }
  // As many different targets as the table gives the levels.
  EXPECT_EQ(targets.size(), ctest::expected_distinct_targets());
}

}  // namespace
}  // namespace mixprec::kernels

namespace mixprec::optim {
namespace {

std::vector<std::uint8_t> bits_of(const Tensor& t) {
  std::vector<std::uint8_t> out(t.nbytes());
  std::memcpy(out.data(), t.data_ptr(), t.nbytes());
  return out;
}

/// n elements of a 16-bit parameter at 1.0 after `steps` SGD updates of exactly lr (grad 1).
Tensor tiny_updates(DType dtype, MasterWeights master, int steps, std::int64_t n, std::uint64_t seed,
                    std::unique_ptr<SGD>* keep = nullptr) {
  const std::vector<float> ones(static_cast<std::size_t>(n), 1.0f);
  Tensor p = Tensor::from_vector(ones, {n}, dtype);
  p.set_requires_grad();
  auto opt = std::make_unique<SGD>(std::vector<Tensor>{p}, SgdOptions{.lr = 1e-4f},
                                   OptimizerOptions{.master_weights = master, .seed = seed});
  const Tensor g = Tensor::from_vector(ones, {n}, DType::f32);
  for (int t = 0; t < steps; ++t) {
    p.set_grad(g);
    opt->step();
  }
  if (keep != nullptr) *keep = std::move(opt);
  return p;
}

TEST(OptimMaster, Fp32MasterKeepsUpdatesA16BitParameterWouldLose) {
  // Updating bf16 (or f16) directly with round-to-nearest loses every 1e-4 step below 1.0,
  // where the spacing is 2^-8 (2^-11): the parameter never moves.
  bfloat16 b(1.0f);
  float16 h(1.0f);
  for (int t = 0; t < 1000; ++t) b = bfloat16(static_cast<float>(b) - 1e-4f), h = float16(static_cast<float>(h) - 1e-4f);
  EXPECT_EQ(static_cast<float>(b), 1.0f);
  EXPECT_EQ(static_cast<float>(h), 1.0f);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    std::unique_ptr<SGD> opt;
    const Tensor p = tiny_updates(dtype, MasterWeights::keep_fp32, 1000, 16, 0, &opt);
    // 1000 f32 subtractions near 0.9 round by at most 2^-25 each: 3e-5 in all.
    for (const float m : opt->master(0).to_vector()) EXPECT_NEAR(m, 0.9f, 5e-5f) << name(dtype);
    const std::vector<float> values = p.to_vector();
    const float master0 = opt->master(0).to_vector()[0];
    for (const float v : values) {
      EXPECT_EQ(v, Tensor::from_vector({master0}, {1}, dtype).item());  // RNE copy of the master
      EXPECT_NEAR(v, 0.9f, traits(dtype).epsilon / 4);  // half the spacing (epsilon/2) in [0.5, 1)
    }
  }
}

TEST(OptimStochastic, MeanFollowsTheExactTrajectory) {
  // Each step rounds 1e-4 down with probability 1e-4 / spacing; the per-element noise after 1000
  // steps has a std of about 0.02 (bf16) or 0.006 (f16), so the mean of 4096 elements is within
  // 5 sigma = 0.0016 of 0.9 (seeded: the check is deterministic).
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const std::vector<float> v = tiny_updates(dtype, MasterWeights::none_stochastic_rounding, 1000, 4096, 42).to_vector();
    double mean = 0;
    for (const float x : v) mean += x;
    mean /= static_cast<double>(v.size());
    EXPECT_NEAR(mean, 0.9, 0.002) << name(dtype);
    EXPECT_NE(*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  }
}

TEST(OptimStochastic, ReproducibleAndIndependentOfThreads) {
  constexpr std::int64_t n = 100003;  // several OpenMP chunks
  const auto a = bits_of(tiny_updates(DType::bf16, MasterWeights::none_stochastic_rounding, 3, n, 9));
  const auto b = bits_of(tiny_updates(DType::bf16, MasterWeights::none_stochastic_rounding, 3, n, 9));
  const auto c = bits_of(tiny_updates(DType::bf16, MasterWeights::none_stochastic_rounding, 3, n, 10));
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = bits_of(tiny_updates(DType::bf16, MasterWeights::none_stochastic_rounding, 3, n, 9));
  omp_set_num_threads(threads);
  EXPECT_TRUE(a == one);
}

}  // namespace
}  // namespace mixprec::optim
