// Reference scaled dot-product attention: the spec of kernels/attention.h in plain scalar f32
// loops. It materialises one row of scores at a time (O(tk)), never the whole matrix; the
// backward accumulates dk and dv of one batch-head in f32 buffers of [tk, d] and [tk, dv].
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/spec/attention_rules.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {

void detail::check_attention_desc(const char* op, const AttentionDesc& d) {
  MIXPREC_CHECK(d.bh >= 0 && d.tq >= 0 && d.tk >= 0 && d.d >= 0 && d.dv >= 0, ShapeError, op,
                "negative extent (bh " << d.bh << ", tq " << d.tq << ", tk " << d.tk << ", d "
                                       << d.d << ", dv " << d.dv << ")");
  require_compute_dtype(op, d.dtype);
  MIXPREC_CHECK(!d.round_probs || d.dtype != DType::f32, ValueError, op,
                "round_probs rounds P and dS to a 16-bit compute dtype; it needs dtype bf16 or "
                "f16, got f32 (leave round_probs false for f32)");
  MIXPREC_CHECK(d.dropout_p >= 0.0f && d.dropout_p < 1.0f, ValueError, op,
                "dropout_p must be in [0, 1), got " << d.dropout_p);
  MIXPREC_CHECK(d.mask == nullptr || d.mask_offsets != nullptr, ValueError, op,
                "a mask needs its per-batch-head offsets");
  MIXPREC_CHECK(d.heads >= 1 && d.bh % d.heads == 0, ShapeError, op,
                "heads must be >= 1 and divide bh, got heads " << d.heads << ", bh " << d.bh);
  for (const AttentionLayout* l : {&d.q_rows, &d.k_rows, &d.v_rows, &d.out_rows}) {
    MIXPREC_CHECK(l->batch >= 0 && l->head >= 0 && l->row >= 0, ShapeError, op,
                  "negative row layout stride (batch " << l->batch << ", head " << l->head
                                                       << ", row " << l->row << ")");
  }
}

namespace ref {
namespace {

/// Element i of a dtype buffer as f32.
float load(const void* p, DType t, std::int64_t i) {
  return dispatch(t, [&](auto tag) {
    return static_cast<float>(static_cast<const decltype(tag)*>(p)[i]);
  });
}

/// v rounded to dtype t and back (round-to-nearest-even, the storage conversion): r() of the
/// round_probs spec (attention.h).
float round_to(DType t, float v) {
  return dispatch(t, [&](auto tag) { return static_cast<float>(decltype(tag)(v)); });
}

void store(void* p, DType t, std::int64_t i, float v) {
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(p)[i] = T(v);
  });
}

/// s_ij for every j of row i of batch-head b, masked (O(tk) floats).
void score_row(const AttentionDesc& d, const void* q, const void* k, std::int64_t b,
               std::int64_t i, std::vector<float>& s) {
  const std::int64_t qo = detail::q_row(d, b, i);
  for (std::int64_t j = 0; j < d.tk; ++j) {
    const std::int64_t ko = detail::k_row(d, b, j);
    float dot = 0.0f;
    for (std::int64_t c = 0; c < d.d; ++c) dot += load(q, d.dtype, qo + c) * load(k, d.dtype, ko + c);
    s[j] = detail::masked_score(d, b, i, j, d.scale * dot);
  }
}

}  // namespace

void attention_forward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                       void* out, float* lse) {
  detail::check_attention_desc("attention_forward", d);
  std::vector<float> s(static_cast<std::size_t>(d.tk)), acc(static_cast<std::size_t>(d.dv));
  for (std::int64_t b = 0; b < d.bh; ++b) {
    for (std::int64_t i = 0; i < d.tq; ++i) {
      score_row(d, q, k, b, i, s);
      float m = -INFINITY;
      for (float x : s) m = x > m ? x : m;
      const std::int64_t oo = detail::out_row(d, b, i);
      if (m == -INFINITY) {  // every key masked: output 0, lse +inf (see attention.h)
        for (std::int64_t c = 0; c < d.dv; ++c) store(out, d.dtype, oo + c, 0.0f);
        lse[b * d.tq + i] = INFINITY;
        continue;
      }
      float sum = 0.0f;
      for (float x : s) sum += std::exp(x - m);
      const float inv = 1.0f / sum;
      std::fill(acc.begin(), acc.end(), 0.0f);
      if (d.round_probs) {
        // The 16-bit spec: the unnormalised p (against the row max, dropout applied) is rounded
        // to dtype before the product, as a flash kernel rounds its P tile; 1/l comes after the
        // sum, unrounded.
        for (std::int64_t j = 0; j < d.tk; ++j) {
          const float p =
              round_to(d.dtype, std::exp(s[j] - m) * detail::dropout_factor(d, b, i, j));
          for (std::int64_t c = 0; c < d.dv; ++c) acc[c] += p * load(v, d.dtype, detail::v_row(d, b, j) + c);
        }
        for (std::int64_t c = 0; c < d.dv; ++c) store(out, d.dtype, oo + c, acc[c] * inv);
      } else {
        for (std::int64_t j = 0; j < d.tk; ++j) {
          const float p = std::exp(s[j] - m) * inv * detail::dropout_factor(d, b, i, j);
          for (std::int64_t c = 0; c < d.dv; ++c) acc[c] += p * load(v, d.dtype, detail::v_row(d, b, j) + c);
        }
        for (std::int64_t c = 0; c < d.dv; ++c) store(out, d.dtype, oo + c, acc[c]);
      }
      lse[b * d.tq + i] = m + std::log(sum);
    }
  }
}

void attention_backward(const AttentionDesc& d, const void* q, const void* k, const void* v,
                        const void* out, const float* lse, const void* dout, void* dq, void* dk,
                        void* dv) {
  detail::check_attention_desc("attention_backward", d);
  std::vector<float> s(static_cast<std::size_t>(d.tk)), dq_acc(static_cast<std::size_t>(d.d));
  std::vector<float> dk_acc(static_cast<std::size_t>(d.tk * d.d));
  std::vector<float> dv_acc(static_cast<std::size_t>(d.tk * d.dv));
  for (std::int64_t b = 0; b < d.bh; ++b) {
    std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
    std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
    for (std::int64_t i = 0; i < d.tq; ++i) {
      const std::int64_t qo = detail::q_row(d, b, i), oo = detail::out_row(d, b, i);
      std::fill(dq_acc.begin(), dq_acc.end(), 0.0f);
      score_row(d, q, k, b, i, s);
      float di = 0.0f;  // D_i = dout_i . out_i = sum_j p_ij dp_ij
      for (std::int64_t c = 0; c < d.dv; ++c) di += load(dout, d.dtype, oo + c) * load(out, d.dtype, oo + c);
      const float l = lse[b * d.tq + i];
      for (std::int64_t j = 0; j < d.tk; ++j) {
        const float p = std::exp(s[j] - l);  // 0 for masked keys and for fully masked rows
        if (p == 0.0f) continue;
        const float z = detail::dropout_factor(d, b, i, j);
        const std::int64_t ko = detail::k_row(d, b, j), vo = detail::v_row(d, b, j);
        // Under round_probs the coefficients of the products (p z for dv, ds for dq and dk)
        // are rounded to dtype; dp, D_i and ds itself are computed in f32 from unrounded p.
        const float pz = d.round_probs ? round_to(d.dtype, p * z) : p * z;
        float dp = 0.0f;
        for (std::int64_t c = 0; c < d.dv; ++c) {
          const float g = load(dout, d.dtype, oo + c);
          dp += g * load(v, d.dtype, vo + c);
          dv_acc[j * d.dv + c] += pz * g;
        }
        const float ds_f32 = p * (dp * z - di);
        const float ds = d.round_probs ? round_to(d.dtype, ds_f32) : ds_f32;
        for (std::int64_t c = 0; c < d.d; ++c) {
          dq_acc[c] += ds * load(k, d.dtype, ko + c);
          dk_acc[j * d.d + c] += ds * load(q, d.dtype, qo + c);
        }
      }
      for (std::int64_t c = 0; c < d.d; ++c) store(dq, d.dtype, qo + c, d.scale * dq_acc[c]);
    }
    for (std::int64_t j = 0; j < d.tk; ++j) {
      for (std::int64_t c = 0; c < d.d; ++c) {
        store(dk, d.dtype, detail::k_row(d, b, j) + c, d.scale * dk_acc[j * d.d + c]);
      }
      for (std::int64_t c = 0; c < d.dv; ++c) {
        store(dv, d.dtype, detail::v_row(d, b, j) + c, dv_acc[j * d.dv + c]);
      }
    }
  }
}

}  // namespace ref
}  // namespace mixprec::kernels
