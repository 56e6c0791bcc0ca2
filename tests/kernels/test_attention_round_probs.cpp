// AttentionDesc::round_probs, the 16-bit autocast spec of attention (kernels/attention.h): P and
// dS rounded to the compute dtype before the products that use them.
//  - the reference against a straightforward double-precision evaluation of the spec's formulas
//    (only p and ds rounded, through the project's bf16/f16 types), tight, and measurably apart
//    from the unrounded reference (so the test sees the rounding, not just noise);
//  - the blocked cpu kernel against the reference on every SIMD target: where one key block
//    holds the whole row its running max is the row max, so it must agree with the rounded
//    reference far better than the unrounded one does; with many key blocks (it rounds against
//    a running max) within the spec's one extra rounding per probability;
//  - f32 with round_probs is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;
using ktest::random_buffer;

constexpr DType kHalfTypes[] = {DType::bf16, DType::f16};

/// One attention problem with contiguous operands; the desc has round_probs set.
struct Problem {
  AttentionDesc desc;
  Buffer q, k, v, dout;
  Problem(std::int64_t bh, std::int64_t tq, std::int64_t tk, std::int64_t d, std::int64_t dv,
          DType t, bool causal, float dropout_p)
      : q(random_buffer(t, bh * tq * d, -1.5f, 1.5f, 11)),
        k(random_buffer(t, bh * tk * d, -1.5f, 1.5f, 12)),
        v(random_buffer(t, bh * tk * dv, -1.0f, 1.0f, 13)),
        dout(random_buffer(t, bh * tq * dv, -1.0f, 1.0f, 14)) {
    desc.bh = bh; desc.tq = tq; desc.tk = tk; desc.d = d; desc.dv = dv;
    desc.dtype = t;
    desc.scale = 1.0f / std::sqrt(static_cast<float>(d));
    desc.causal = causal;
    desc.dropout_p = dropout_p;
    desc.seed = 5;
    desc.round_probs = true;
  }
};

struct Result {
  Buffer out, dq, dk, dv;
  std::vector<float> lse;
};

using Forward = decltype(&ref::attention_forward);
using Backward = decltype(&ref::attention_backward);

/// fwd on desc, then bwd on the *reference's* rounded out and lse (the backward compared alone,
/// and every backward sees the same D_i).
Result run(const Problem& p, const AttentionDesc& d, Forward fwd, Backward bwd) {
  Result r{Buffer(d.dtype, d.bh * d.tq * d.dv), Buffer(d.dtype, d.bh * d.tq * d.d),
           Buffer(d.dtype, d.bh * d.tk * d.d), Buffer(d.dtype, d.bh * d.tk * d.dv),
           std::vector<float>(static_cast<std::size_t>(d.bh * d.tq))};
  fwd(d, p.q.data(), p.k.data(), p.v.data(), r.out.data(), r.lse.data());
  Buffer ref_out(d.dtype, r.out.size());
  std::vector<float> ref_lse(r.lse.size());
  ref::attention_forward(p.desc, p.q.data(), p.k.data(), p.v.data(), ref_out.data(),
                         ref_lse.data());
  bwd(d, p.q.data(), p.k.data(), p.v.data(), ref_out.data(), ref_lse.data(), p.dout.data(),
      r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

/// x rounded to dtype t through the project's own conversion types (the r() of the spec).
double round_to(DType t, double x) {
  const auto f = static_cast<float>(x);
  return t == DType::bf16 ? static_cast<float>(bfloat16(f)) : static_cast<float>(float16(f));
}

/// The spec of attention.h evaluated in double, rounding only p (and ds) to t when `rounded`:
/// out, dq, dk, dv before their final rounding to t. No dropout, no mask. The backward's input
/// out (for D_i = dout_i . out_i) is `stored`, the forward's output as the backward receives it.
struct Spec {
  std::vector<double> out, dq, dk, dv;
  /// Per element, the largest |term| of its sum: an f32 last bit of a score, exp, dp or D can
  /// move one p or ds across a rounding tie, changing that term by one ulp of t (<= eps |term|).
  std::vector<double> out_term, dq_term, dk_term, dv_term;
};
Spec spec(const Problem& p, bool rounded, const Buffer& stored) {
  const AttentionDesc& d = p.desc;
  const DType t = d.dtype;
  Spec r{std::vector<double>(static_cast<std::size_t>(d.bh * d.tq * d.dv)),
         std::vector<double>(static_cast<std::size_t>(d.bh * d.tq * d.d)),
         std::vector<double>(static_cast<std::size_t>(d.bh * d.tk * d.d)),
         std::vector<double>(static_cast<std::size_t>(d.bh * d.tk * d.dv)),
         std::vector<double>(static_cast<std::size_t>(d.bh * d.tq * d.dv)),
         std::vector<double>(static_cast<std::size_t>(d.bh * d.tq * d.d)),
         std::vector<double>(static_cast<std::size_t>(d.bh * d.tk * d.d)),
         std::vector<double>(static_cast<std::size_t>(d.bh * d.tk * d.dv))};
  const auto track = [](double& slot, double term) { slot = std::max(slot, std::fabs(term)); };
  const auto r_ = [&](double x) { return rounded ? round_to(t, x) : x; };
  std::vector<double> s(static_cast<std::size_t>(d.tk)), o(static_cast<std::size_t>(d.dv));
  for (std::int64_t b = 0; b < d.bh; ++b) {
    for (std::int64_t i = 0; i < d.tq; ++i) {
      double m = -INFINITY;
      for (std::int64_t j = 0; j < d.tk; ++j) {
        // The scores are the f32 dot products every kernel starts from (the spec's rounding
        // points come after them): a double score would move some p across a rounding tie.
        float dot = 0.0f;
        for (std::int64_t c = 0; c < d.d; ++c) {
          dot += p.q.get((b * d.tq + i) * d.d + c) * p.k.get((b * d.tk + j) * d.d + c);
        }
        s[j] = d.causal && j > i ? -INFINITY : static_cast<double>(d.scale * dot);
        m = std::max(m, s[j]);
      }
      double l = 0.0;
      for (std::int64_t j = 0; j < d.tk; ++j) l += std::exp(s[j] - m);
      // forward: out_i = (sum_j r(e^(s - m)) v_j) / l
      std::fill(o.begin(), o.end(), 0.0);
      for (std::int64_t j = 0; j < d.tk; ++j) {
        const double pt = r_(std::exp(s[j] - m));
        for (std::int64_t c = 0; c < d.dv; ++c) {
          o[c] += pt * p.v.get((b * d.tk + j) * d.dv + c);
          track(r.out_term[(b * d.tq + i) * d.dv + c], pt * p.v.get((b * d.tk + j) * d.dv + c) / l);
        }
      }
      for (std::int64_t c = 0; c < d.dv; ++c) r.out[(b * d.tq + i) * d.dv + c] = o[c] / l;
      // backward: p from the exact softmax, D_i = dout_i . out_i with the stored out
      double di = 0.0;
      for (std::int64_t c = 0; c < d.dv; ++c) {
        di += static_cast<double>(p.dout.get((b * d.tq + i) * d.dv + c)) * stored.get((b * d.tq + i) * d.dv + c);
      }
      for (std::int64_t j = 0; j < d.tk; ++j) {
        const double pj = std::exp(s[j] - m) / l;
        double dp = 0.0;
        for (std::int64_t c = 0; c < d.dv; ++c) {
          dp += static_cast<double>(p.dout.get((b * d.tq + i) * d.dv + c)) * p.v.get((b * d.tk + j) * d.dv + c);
        }
        const double pr = r_(pj), ds = r_(pj * (dp - di));
        for (std::int64_t c = 0; c < d.dv; ++c) {
          const double tv = pr * p.dout.get((b * d.tq + i) * d.dv + c);
          r.dv[(b * d.tk + j) * d.dv + c] += tv;
          track(r.dv_term[(b * d.tk + j) * d.dv + c], tv);
        }
        for (std::int64_t c = 0; c < d.d; ++c) {
          const double tq = d.scale * ds * p.k.get((b * d.tk + j) * d.d + c);
          const double tk = d.scale * ds * p.q.get((b * d.tq + i) * d.d + c);
          r.dq[(b * d.tq + i) * d.d + c] += tq;
          r.dk[(b * d.tk + j) * d.d + c] += tk;
          track(r.dq_term[(b * d.tq + i) * d.d + c], tq);
          track(r.dk_term[(b * d.tk + j) * d.d + c], tk);
        }
      }
    }
  }
  return r;
}

/// Root-mean-square of got - want over all elements.
double rms_diff(const Buffer& got, const std::vector<double>& want) {
  double s = 0.0;
  for (std::int64_t i = 0; i < got.size(); ++i) {
    const double e = got.get(i) - want[static_cast<std::size_t>(i)];
    s += e * e;
  }
  return std::sqrt(s / static_cast<double>(got.size()));
}
double rms_diff(const Buffer& got, const Buffer& want) {
  std::vector<double> w(static_cast<std::size_t>(want.size()));
  for (std::int64_t i = 0; i < want.size(); ++i) w[static_cast<std::size_t>(i)] = want.get(i);
  return rms_diff(got, w);
}

/// Inputs where the rounding of p and ds is larger than the outputs' own rounding to t: the
/// scores span a narrow range (scale 0.05), so the p of a row are alike and not exact in t;
/// v_j and dout_i alternate in sign with j and i, so out, dv (and through them ds) are sums of
/// large alternating terms that cancel, while the roundings of the terms do not; the last half
/// of q's and k's columns are 1 (a constant added to every score of a row, which the softmax
/// ignores), so dq and dk there are scale * sum r(ds): zero up to the rounding of ds and D.
Problem cancelling(DType t) {
  Problem p(2, 70, 90, 24, 40, t, true, 0.0f);
  p.desc.scale = 0.05f;
  const AttentionDesc& d = p.desc;
  for (std::int64_t r = 0; r < d.bh * d.tq; ++r) {
    for (std::int64_t c = d.d / 2; c < d.d; ++c) p.q.set(r * d.d + c, 1.0f);
    const float sign = r % 2 == 0 ? 1.0f : -1.0f;
    for (std::int64_t c = 0; c < d.dv; ++c) p.dout.set(r * d.dv + c, sign * p.dout.get(c));
  }
  for (std::int64_t r = 0; r < d.bh * d.tk; ++r) {
    for (std::int64_t c = d.d / 2; c < d.d; ++c) p.k.set(r * d.d + c, 1.0f);
    const float sign = r % 2 == 0 ? 1.0f : -1.0f;
    for (std::int64_t c = 0; c < d.dv; ++c) p.v.set(r * d.dv + c, sign * p.v.get(c));
  }
  return p;
}

TEST(AttentionRoundProbs, TheReferenceIsTheSpecsFormula) {
  // Against the double evaluation, the reference's only errors are its f32 sums and the final
  // rounding of each output to t, plus the rare p or ds that an f32 last bit moves across a
  // rounding tie: element by element within half an ulp of t and one ulp of one term. On these
  // inputs dropping the rounding of p and ds moves many outputs by a sum of roundings of whole
  // terms, which that tolerance does not admit: the unrounded reference must miss it often.
  for (DType t : kHalfTypes) {
    const Problem p = cancelling(t);
    const Result got = run(p, p.desc, &ref::attention_forward, &ref::attention_backward);
    AttentionDesc plain = p.desc;
    plain.round_probs = false;
    const Result unrounded = run(p, plain, &ref::attention_forward, &ref::attention_backward);
    // Both backwards ran on the rounded reference's out (run()), so both specs take D from it.
    const Spec want = spec(p, true, got.out), want_plain = spec(p, false, got.out);
    const double eps = ktest::eps(t);
    const auto check = [&](const Buffer& g, const Buffer& u, const std::vector<double>& w,
                           const std::vector<double>& term, const std::vector<double>& w_plain,
                           const char* what) {
      const std::string where = std::string(name(t)) + " " + what;
      // Half an ulp of t (the output's own rounding; <= eps/2 relative), one flip of a term's
      // rounding (see Spec), and 1e-6 for the f32 sums.
      const auto tol = [&](std::int64_t i) {
        const auto k = static_cast<std::size_t>(i);
        return 0.5 * eps * std::fabs(w[k]) + eps * term[k] + 1e-6;
      };
      std::int64_t unrounded_outside = 0;
      for (std::int64_t i = 0; i < g.size(); ++i) {
        const double wi = w[static_cast<std::size_t>(i)];
        ASSERT_NEAR(g.get(i), wi, tol(i)) << where << " element " << i;
        // The unrounded reference against the unrounded double formula: the evaluation's check.
        ASSERT_NEAR(u.get(i), w_plain[static_cast<std::size_t>(i)], tol(i)) << where << " unrounded " << i;
        if (std::fabs(u.get(i) - wi) > tol(i)) ++unrounded_outside;
      }
      // The rounding is visible: the rounded reference meets the tolerance everywhere, the
      // unrounded one misses the rounded spec in more than 1% of the elements (2.5% to 8% on
      // these inputs), so a reference that dropped or misplaced a rounding fails here.
      EXPECT_GT(unrounded_outside, g.size() / 100) << where << " rounding not visible";
    };
    check(got.out, unrounded.out, want.out, want.out_term, want_plain.out, "out");
    check(got.dv, unrounded.dv, want.dv, want.dv_term, want_plain.dv, "dv");
    check(got.dq, unrounded.dq, want.dq, want.dq_term, want_plain.dq, "dq");
    check(got.dk, unrounded.dk, want.dk, want.dk_term, want_plain.dk, "dk");
  }
}

TEST(AttentionRoundProbs, TheCpuKernelRoundsAsTheReferenceWithOneKeyBlock) {
  // tk <= 64: one key block, so the cpu kernel's running max is the row max and its rounded p
  // are the reference's (up to the f32 exp's last bit); the backward rounds exp(s - lse) in
  // both. What remains is f32 summation order, so the cpu output is far closer to the rounded
  // reference than the unrounded reference is (a kernel that skipped the rounding would be as
  // far as the unrounded one).
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType t : kHalfTypes) {
      for (float dropout : {0.0f, 0.3f}) {
        const Problem p(3, 70, 64, 40, 48, t, false, dropout);
        const Result want = run(p, p.desc, &ref::attention_forward, &ref::attention_backward);
        const Result got = run(p, p.desc, &cpu::attention_forward, &cpu::attention_backward);
        AttentionDesc plain = p.desc;
        plain.round_probs = false;
        const Result unrounded = run(p, plain, &ref::attention_forward, &ref::attention_backward);
        const std::string where = std::string(name(isa)) + " " + name(t) +
                                  (dropout > 0.0f ? " dropout" : "");
        for (auto [g, w, u, what] : {std::tuple{&got.out, &want.out, &unrounded.out, "out"},
                                     std::tuple{&got.dq, &want.dq, &unrounded.dq, "dq"},
                                     std::tuple{&got.dk, &want.dk, &unrounded.dk, "dk"},
                                     std::tuple{&got.dv, &want.dv, &unrounded.dv, "dv"}}) {
          EXPECT_LT(4.0 * rms_diff(*g, *w), rms_diff(*u, *w)) << where << " " << what;
        }
      }
    }
  }
}

TEST(AttentionRoundProbs, TheCpuKernelIsWithinTheRunningMaxAllowance) {
  // Many key blocks, causal, partial blocks: the cpu forward rounds e^(s - m) against its
  // running max and rescales afterwards, which attention.h allows: the two roundings of one
  // probability differ by at most one ulp of t, eps * p_ij relative, so
  // |out - ref| <= eps * sum_j p_ij |v_j| <= eps * max|v| (= eps here), plus the output's own
  // rounding (eps relative). The backward rounds exp(s - lse) as the reference does: its
  // differences are f32 summation order and the rare rounding flip that order causes.
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType t : kHalfTypes) {
      for (const auto& [d, causal] : {std::pair{64, true}, std::pair{32, false}}) {
        const Problem p(2, 200, 200, d, d, t, causal, 0.0f);
        const Result want = run(p, p.desc, &ref::attention_forward, &ref::attention_backward);
        const Result got = run(p, p.desc, &cpu::attention_forward, &cpu::attention_backward);
        const double eps = ktest::eps(t);
        const std::string where = std::string(name(isa)) + " " + name(t) + " d " + std::to_string(d);
        for (auto [g, w, what] : {std::tuple{&got.out, &want.out, "out"},
                                  std::tuple{&got.dq, &want.dq, "dq"},
                                  std::tuple{&got.dk, &want.dk, "dk"},
                                  std::tuple{&got.dv, &want.dv, "dv"}}) {
          const auto* ref = w;  // clang before 16 cannot capture a structured binding
          ktest::expect_close(*g, *ref, [&](std::int64_t i) { return eps + eps * std::fabs(ref->get(i)); },
                              where + " " + what);
        }
        for (std::size_t i = 0; i < want.lse.size(); ++i) {
          EXPECT_NEAR(got.lse[i], want.lse[i], 1e-4 * (1 + std::fabs(want.lse[i]))) << where;
        }
      }
    }
  }
}

TEST(AttentionRoundProbs, F32IsRefused) {
  // round_probs names a 16-bit rounding: on f32 it is a caller's mistake, not a no-op.
  AttentionDesc d;
  d.bh = 1; d.tq = 1; d.tk = 1; d.d = 1; d.dv = 1;
  d.round_probs = true;
  float x = 0.0f, lse = 0.0f;
  EXPECT_THROW(ref::attention_forward(d, &x, &x, &x, &x, &lse), ValueError);
  EXPECT_THROW(cpu::attention_forward(d, &x, &x, &x, &x, &lse), ValueError);
  EXPECT_THROW(ref::attention_backward(d, &x, &x, &x, &x, &lse, &x, &x, &x, &x), ValueError);
  EXPECT_THROW(cpu::attention_backward(d, &x, &x, &x, &x, &lse, &x, &x, &x, &x), ValueError);
}

TEST(AttentionRoundProbs, KeepingDsOrRecomputingItGivesTheSameBits) {
  // Pass A stores ds already rounded; pass B's recomputation rounds it the same way.
  for (DType t : kHalfTypes) {
    const Problem p(2, 130, 150, 32, 24, t, true, 0.2f);
    const Result kept = run(p, p.desc, &cpu::attention_forward, &cpu::attention_backward);
    const std::size_t saved = cpu::set_attention_ds_budget(0);
    const Result recomputed = run(p, p.desc, &cpu::attention_forward, &cpu::attention_backward);
    cpu::set_attention_ds_budget(saved);
    ktest::expect_bitwise(kept.dq, recomputed.dq, std::string(name(t)) + " dq");
  }
}

}  // namespace
}  // namespace mixprec::kernels
