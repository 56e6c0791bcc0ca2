// The blocked attention kernel (kernels::cpu) against the scalar reference (kernels::ref), at
// every SIMD level, in every dtype, with the causal cut, an additive mask, dropout and shapes
// that leave partial blocks; plus thread-count independence and the fully-masked-row rule.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;
using ktest::random_buffer;

struct Shape5 {
  std::int64_t bh, tq, tk, d, dv;
};

/// Inputs of one attention call, with a [tq, tk] f32 mask broadcast over every batch-head.
struct Problem {
  AttentionDesc desc;
  Buffer q, k, v, dout;
  std::vector<float> mask;
  std::vector<std::int64_t> offsets;

  Problem(const Shape5& s, DType t, bool causal, bool masked, float dropout_p)
      : q(random_buffer(t, s.bh * s.tq * s.d, -1.5f, 1.5f, 1)),
        k(random_buffer(t, s.bh * s.tk * s.d, -1.5f, 1.5f, 2)),
        v(random_buffer(t, s.bh * s.tk * s.dv, -1.0f, 1.0f, 3)),
        dout(random_buffer(t, s.bh * s.tq * s.dv, -1.0f, 1.0f, 4)) {
    desc.bh = s.bh; desc.tq = s.tq; desc.tk = s.tk; desc.d = s.d; desc.dv = s.dv;
    desc.dtype = t;
    desc.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
    desc.causal = causal;
    desc.dropout_p = dropout_p;
    desc.seed = 77;
    if (masked) {
      // Mostly small random biases, every 5th key blocked, and row 1 blocked entirely.
      const Buffer m = random_buffer(DType::f32, s.tq * s.tk, -2.0f, 2.0f, 5);
      mask.resize(static_cast<std::size_t>(s.tq * s.tk));
      for (std::int64_t i = 0; i < s.tq; ++i) {
        for (std::int64_t j = 0; j < s.tk; ++j) {
          const bool blocked = j % 5 == 3 || i == 1;
          mask[i * s.tk + j] = blocked ? -INFINITY : m.get(i * s.tk + j);
        }
      }
      offsets.assign(static_cast<std::size_t>(s.bh), 0);
      desc.mask = mask.data();
      desc.mask_offsets = offsets.data();
      desc.mask_stride_q = s.tk;
      desc.mask_stride_k = 1;
    }
  }
};

struct Result {
  Buffer out, dq, dk, dv;
  std::vector<float> lse;
};

using Forward = decltype(&ref::attention_forward);
using Backward = decltype(&ref::attention_backward);

/// Runs fwd, then bwd on the reference's out and lse (so the backward is compared alone).
Result run(const Problem& p, Forward fwd, Backward bwd) {
  const AttentionDesc& d = p.desc;
  Result r{Buffer(d.dtype, d.bh * d.tq * d.dv), Buffer(d.dtype, d.bh * d.tq * d.d),
           Buffer(d.dtype, d.bh * d.tk * d.d), Buffer(d.dtype, d.bh * d.tk * d.dv),
           std::vector<float>(static_cast<std::size_t>(d.bh * d.tq))};
  fwd(d, p.q.data(), p.k.data(), p.v.data(), r.out.data(), r.lse.data());
  Buffer ref_out(d.dtype, d.bh * d.tq * d.dv);
  std::vector<float> ref_lse(r.lse.size());
  ref::attention_forward(d, p.q.data(), p.k.data(), p.v.data(), ref_out.data(), ref_lse.data());
  bwd(d, p.q.data(), p.k.data(), p.v.data(), ref_out.data(), ref_lse.data(), p.dout.data(),
      r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

double max_abs(const Buffer& b) {
  double m = 0.0;
  for (std::int64_t i = 0; i < b.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(b.get(i))));
  return m;
}

/// Summation order and exp differ between the two: a few f32 roundings relative to the
/// output's largest element (the sums cancel), plus one rounding of the stored dtype.
void expect_matches(const Buffer& got, const Buffer& want, const std::string& what) {
  const double floor = 256 * ktest::eps(DType::f32) * std::max(max_abs(want), 1e-3);
  const double k = 2 * ktest::eps(want.dtype());
  ktest::expect_close(got, want, [&](std::int64_t i) { return floor + k * std::fabs(want.get(i)); },
                      what);
}

const Shape5 kShapes[] = {
    {2, 70, 130, 20, 36},  // partial query and key blocks, d and dv not multiples of 16
    {1, 64, 64, 64, 64},   // exactly one block
    {3, 5, 9, 8, 3},       // smaller than a block
    {1, 130, 40, 16, 16},  // more queries than keys (causal rows past tk see every key)
};

struct Variant {
  const char* name;
  bool causal, masked;
  float dropout;
};
const Variant kVariants[] = {{"plain", false, false, 0.0f},
                             {"causal", true, false, 0.0f},
                             {"mask", false, true, 0.0f},
                             {"causal+mask+dropout", true, true, 0.3f},
                             {"dropout", false, false, 0.5f}};

TEST(AttentionKernels, MatchTheReferenceOnEveryTarget) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType t : ktest::kAllDTypes) {
      for (const Shape5& s : kShapes) {
        for (const Variant& var : kVariants) {
          const Problem p(s, t, var.causal, var.masked, var.dropout);
          const Result want = run(p, &ref::attention_forward, &ref::attention_backward);
          const Result got = run(p, &cpu::attention_forward, &cpu::attention_backward);
          const std::string what = std::string(name(isa)) + " " + name(t) + " " + var.name +
                                   " [" + std::to_string(s.bh) + "," + std::to_string(s.tq) +
                                   "," + std::to_string(s.tk) + "," + std::to_string(s.d) + "," +
                                   std::to_string(s.dv) + "]";
          expect_matches(got.out, want.out, what + " out");
          expect_matches(got.dq, want.dq, what + " dq");
          expect_matches(got.dk, want.dk, what + " dk");
          expect_matches(got.dv, want.dv, what + " dv");
          for (std::size_t i = 0; i < want.lse.size(); ++i) {
            if (std::isinf(want.lse[i])) {
              EXPECT_EQ(got.lse[i], want.lse[i]) << what << " lse " << i;
            } else {
              EXPECT_NEAR(got.lse[i], want.lse[i], 1e-4 * (1 + std::fabs(want.lse[i])))
                  << what << " lse " << i;
            }
          }
        }
      }
    }
  }
}

TEST(AttentionKernels, GiveTheSameBitsForAnyThreadCount) {
  // Tasks are fixed (batch-head, block) pairs, each summing in a fixed order.
  const Problem p({4, 150, 150, 32, 32}, DType::f32, true, true, 0.2f);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Result one = run(p, &cpu::attention_forward, &cpu::attention_backward);
  omp_set_num_threads(2);
  const Result two = run(p, &cpu::attention_forward, &cpu::attention_backward);
  omp_set_num_threads(saved);
  ktest::expect_bitwise(two.out, one.out, "out");
  ktest::expect_bitwise(two.dq, one.dq, "dq");
  ktest::expect_bitwise(two.dk, one.dk, "dk");
  ktest::expect_bitwise(two.dv, one.dv, "dv");
  EXPECT_EQ(two.lse, one.lse);
}

TEST(AttentionKernels, AFullyMaskedRowGivesZeroOutputAndNoGradient) {
  // Row 1 of the mask blocks every key (see Problem): its output and dq are 0, lse is +inf,
  // and it adds nothing to dk and dv (checked by comparing with the same problem where that
  // row's dout is 0).
  for (auto [fwd, bwd] : {std::pair{&ref::attention_forward, &ref::attention_backward},
                          std::pair{&cpu::attention_forward, &cpu::attention_backward}}) {
    Problem p({2, 6, 10, 8, 8}, DType::f32, false, true, 0.0f);
    const Result r = run(p, fwd, bwd);
    for (std::int64_t b = 0; b < 2; ++b) {
      EXPECT_EQ(r.lse[b * 6 + 1], INFINITY);
      for (std::int64_t c = 0; c < 8; ++c) {
        EXPECT_EQ(r.out.get((b * 6 + 1) * 8 + c), 0.0f);
        EXPECT_EQ(r.dq.get((b * 6 + 1) * 8 + c), 0.0f);
      }
    }
    for (std::int64_t i = 0; i < r.out.size(); ++i) EXPECT_FALSE(std::isnan(r.out.get(i)));
    for (std::int64_t b = 0; b < 2; ++b) {
      for (std::int64_t c = 0; c < 8; ++c) p.dout.set((b * 6 + 1) * 8 + c, 0.0f);
    }
    const Result r0 = run(p, fwd, bwd);
    ktest::expect_bitwise(r.dk, r0.dk, "dk");
    ktest::expect_bitwise(r.dv, r0.dv, "dv");
  }
}

TEST(AttentionKernels, F16LogitsFarBeyondTheF16RangeStayFinite) {
  // q . k ~ 1e5 (f16 overflows at 65504): the scores live in f32 only, so softmax is exact.
  for (auto fwd : {&ref::attention_forward, &cpu::attention_forward}) {
    Problem p({1, 4, 8, 4, 4}, DType::f16, false, false, 0.0f);
    p.desc.scale = 1.0f;
    for (std::int64_t i = 0; i < p.q.size(); ++i) p.q.set(i, 200.0f);
    for (std::int64_t j = 0; j < 8; ++j) {  // key j scores 4 * 200 * 100 * (j + 1) / 8 ~ 1e5
      for (std::int64_t c = 0; c < 4; ++c) p.k.set(j * 4 + c, 100.0f * static_cast<float>(j + 1) / 8.0f);
    }
    Buffer out(DType::f16, 16);
    std::vector<float> lse(4);
    fwd(p.desc, p.q.data(), p.k.data(), p.v.data(), out.data(), lse.data());
    for (std::int64_t i = 0; i < 4; ++i) {
      ASSERT_TRUE(std::isfinite(lse[i]));
      EXPECT_NEAR(lse[i], 80000.0f, 1.0f);  // the largest score, 4 * 200 * 100
      for (std::int64_t c = 0; c < 4; ++c) {  // all the weight on key 7
        EXPECT_EQ(out.get(i * 4 + c), p.v.get(7 * 4 + c));
      }
    }
  }
}

/// [B*H, t, w] contiguous -> [B, t, H, w] contiguous (the projections' layout), or back.
Buffer regroup(const Buffer& src, std::int64_t batches, std::int64_t heads, std::int64_t t,
               std::int64_t w, bool to_heads_inner) {
  Buffer dst(src.dtype(), src.size());
  const std::size_t es = size_of(src.dtype());
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t i = 0; i < t; ++i) {
        const std::int64_t contiguous = ((b * heads + h) * t + i) * w;
        const std::int64_t inner = ((b * t + i) * heads + h) * w;
        const std::int64_t from = to_heads_inner ? contiguous : inner;
        const std::int64_t to = to_heads_inner ? inner : contiguous;
        std::memcpy(static_cast<char*>(dst.data()) + to * static_cast<std::int64_t>(es),
                    static_cast<const char*>(src.data()) + from * static_cast<std::int64_t>(es),
                    static_cast<std::size_t>(w) * es);
      }
    }
  }
  return dst;
}

TEST(AttentionKernels, RowsWhereTheProjectionsPutThemGiveTheContiguousBits) {
  // Attention reading q, k, v (and writing out, dq, dk, dv) in [B, T, H, d] memory through
  // AttentionLayout computes exactly what it computes on the contiguous [B*H, T, d] copies.
  const std::int64_t B = 2, H = 3;
  const Shape5 s{B * H, 70, 70, 20, 36};
  for (DType t : ktest::kAllDTypes) {
    const Problem p(s, t, true, true, 0.3f);
    AttentionDesc inner = p.desc;
    inner.heads = H;
    inner.q_rows = {s.tq * H * s.d, s.d, H * s.d};
    inner.k_rows = {s.tk * H * s.d, s.d, H * s.d};
    inner.v_rows = {s.tk * H * s.dv, s.dv, H * s.dv};
    inner.out_rows = {s.tq * H * s.dv, s.dv, H * s.dv};
    const Buffer q = regroup(p.q, B, H, s.tq, s.d, true), k = regroup(p.k, B, H, s.tk, s.d, true);
    const Buffer v = regroup(p.v, B, H, s.tk, s.dv, true);
    const Buffer dout = regroup(p.dout, B, H, s.tq, s.dv, true);
    for (auto [fwd, bwd, who] : {std::tuple{&ref::attention_forward, &ref::attention_backward, "ref"},
                                 std::tuple{&cpu::attention_forward, &cpu::attention_backward, "cpu"}}) {
      const AttentionDesc& d = p.desc;
      Buffer out(t, d.bh * d.tq * d.dv), dq(t, d.bh * d.tq * d.d), dk(t, d.bh * d.tk * d.d),
          dv(t, d.bh * d.tk * d.dv);
      std::vector<float> lse(static_cast<std::size_t>(d.bh * d.tq));
      fwd(d, p.q.data(), p.k.data(), p.v.data(), out.data(), lse.data());
      bwd(d, p.q.data(), p.k.data(), p.v.data(), out.data(), lse.data(), p.dout.data(), dq.data(),
          dk.data(), dv.data());
      Buffer out2(t, out.size()), dq2(t, dq.size()), dk2(t, dk.size()), dv2(t, dv.size());
      std::vector<float> lse2(lse.size());
      fwd(inner, q.data(), k.data(), v.data(), out2.data(), lse2.data());
      bwd(inner, q.data(), k.data(), v.data(), out2.data(), lse2.data(), dout.data(), dq2.data(),
          dk2.data(), dv2.data());
      const std::string where = std::string(who) + " " + name(t);
      ktest::expect_bitwise(regroup(out2, B, H, s.tq, s.dv, false), out, where + " out");
      EXPECT_EQ(lse2, lse) << where << " lse";
      ktest::expect_bitwise(regroup(dq2, B, H, s.tq, s.d, false), dq, where + " dq");
      ktest::expect_bitwise(regroup(dk2, B, H, s.tk, s.d, false), dk, where + " dk");
      ktest::expect_bitwise(regroup(dv2, B, H, s.tk, s.dv, false), dv, where + " dv");
    }
  }
}

/// Copies contiguous [B*H, t, w] rows into (or, unpacking, out of) part `part` (0 q, 1 k, 2 v)
/// of a packed [B, t, 3, H, w] buffer: a fused q|k|v projection's output.
void pack_part(const Buffer& src, Buffer& dst, std::int64_t part, std::int64_t batches,
               std::int64_t heads, std::int64_t t, std::int64_t w, bool unpack) {
  const std::size_t es = size_of(src.dtype());
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t i = 0; i < t; ++i) {
        const std::int64_t contiguous = ((b * heads + h) * t + i) * w;
        const std::int64_t packed = ((b * t + i) * 3 + part) * heads * w + h * w;
        const std::int64_t from = unpack ? packed : contiguous, to = unpack ? contiguous : packed;
        std::memcpy(static_cast<char*>(dst.data()) + to * static_cast<std::int64_t>(es),
                    static_cast<const char*>(src.data()) + from * static_cast<std::int64_t>(es),
                    static_cast<std::size_t>(w) * es);
      }
    }
  }
}

TEST(AttentionKernels, RowsOfOnePackedProjectionGiveTheContiguousBitsOnEveryTarget) {
  // q, k, v read from one [B, T, 3, H, w] buffer (token rows 3 H w apart, k and v H w and 2 H w
  // after q), dq, dk, dv written into one such buffer, out in [B, T, H, w]: the same bits as
  // the contiguous [B*H, T, w] copies, at every SIMD level (packed_qkv_attention's layout).
  const std::int64_t B = 2, H = 3, T = 70, W = 24;
  const Shape5 s{B * H, T, T, W, W};
  const std::size_t es_row = static_cast<std::size_t>(3 * H * W);
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType t : ktest::kAllDTypes) {
      const Problem p(s, t, true, true, 0.3f);
      AttentionDesc packed = p.desc;
      packed.heads = H;
      packed.q_rows = packed.k_rows = packed.v_rows = {T * 3 * H * W, W, 3 * H * W};
      packed.out_rows = {T * H * W, W, H * W};
      Buffer qkv(t, B * T * static_cast<std::int64_t>(es_row));
      pack_part(p.q, qkv, 0, B, H, T, W, false);
      pack_part(p.k, qkv, 1, B, H, T, W, false);
      pack_part(p.v, qkv, 2, B, H, T, W, false);
      const Buffer dout = regroup(p.dout, B, H, T, W, true);
      const std::int64_t step = H * W * static_cast<std::int64_t>(size_of(t));
      const char* const base = static_cast<const char*>(qkv.data());
      const std::string where = std::string(name(isa)) + " " + name(t);
      const Result want = run(p, &cpu::attention_forward, &cpu::attention_backward);
      Buffer out(t, B * H * T * W), dqkv(t, qkv.size());
      std::vector<float> lse(static_cast<std::size_t>(B * H * T));
      cpu::attention_forward(packed, base, base + step, base + 2 * step, out.data(), lse.data());
      // The backward on the reference forward's out and lse, as run() does.
      Buffer ref_out(t, out.size());
      std::vector<float> ref_lse(lse.size());
      ref::attention_forward(p.desc, p.q.data(), p.k.data(), p.v.data(), ref_out.data(), ref_lse.data());
      char* const g = static_cast<char*>(dqkv.data());
      cpu::attention_backward(packed, base, base + step, base + 2 * step,
                              regroup(ref_out, B, H, T, W, true).data(), ref_lse.data(), dout.data(),
                              g, g + step, g + 2 * step);
      ktest::expect_bitwise(regroup(out, B, H, T, W, false), want.out, where + " out");
      EXPECT_EQ(lse, want.lse) << where << " lse";
      Buffer dq(t, want.dq.size()), dk(t, want.dk.size()), dv(t, want.dv.size());
      pack_part(dqkv, dq, 0, B, H, T, W, true);
      pack_part(dqkv, dk, 1, B, H, T, W, true);
      pack_part(dqkv, dv, 2, B, H, T, W, true);
      ktest::expect_bitwise(dq, want.dq, where + " dq");
      ktest::expect_bitwise(dk, want.dk, where + " dk");
      ktest::expect_bitwise(dv, want.dv, where + " dv");
    }
  }
}

TEST(AttentionKernels, KeepingDsOrRecomputingItGivesTheSameBits) {
  // The backward keeps ds for its dq pass when it fits the budget, else recomputes it; both are
  // the same sums in the same order.
  for (DType t : ktest::kAllDTypes) {
    for (const Shape5& shape : kShapes) {
      const Problem p(shape, t, true, true, 0.3f);
      const Result kept = run(p, &cpu::attention_forward, &cpu::attention_backward);
      const std::size_t saved = cpu::set_attention_ds_budget(0);
      const Result recomputed = run(p, &cpu::attention_forward, &cpu::attention_backward);
      cpu::set_attention_ds_budget(saved);
      ktest::expect_bitwise(kept.dq, recomputed.dq, std::string(name(t)) + " dq");
      ktest::expect_bitwise(kept.dk, recomputed.dk, std::string(name(t)) + " dk");
      ktest::expect_bitwise(kept.dv, recomputed.dv, std::string(name(t)) + " dv");
    }
  }
}

TEST(AttentionKernels, RejectBadDescriptions) {
  AttentionDesc d;
  d.bh = 1; d.tq = 1; d.tk = 1; d.d = 1; d.dv = 1;
  float x = 0.0f, lse = 0.0f;
  d.dropout_p = 1.0f;
  EXPECT_THROW(cpu::attention_forward(d, &x, &x, &x, &x, &lse), ValueError);
  d.dropout_p = 0.0f;
  d.dtype = DType::f8e4m3;
  EXPECT_THROW(ref::attention_forward(d, &x, &x, &x, &x, &lse), DTypeError);
  d.dtype = DType::f32;
  d.tq = -1;
  EXPECT_THROW(cpu::attention_forward(d, &x, &x, &x, &x, &lse), ShapeError);
  d.tq = 1;
  d.bh = 3;
  d.heads = 2;  // must divide bh
  EXPECT_THROW(cpu::attention_forward(d, &x, &x, &x, &x, &lse), ShapeError);
  d.heads = 1;
  d.k_rows.row = -4;
  EXPECT_THROW(ref::attention_forward(d, &x, &x, &x, &x, &lse), ShapeError);
}

}  // namespace
}  // namespace mixprec::kernels
