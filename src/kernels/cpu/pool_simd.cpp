// The vector loops of max / average / global-average pooling, written once over Highway and
// compiled for every target (SSE4/AVX2/AVX3 on x86, NEON/SVE on arm64, 1-lane HWY_SCALAR).
// Lanes run across the outputs of one output row, so every output still visits its window in
// the reference's row-major order with the reference's f32 operations: max pooling picks the
// same element (first maximum, first NaN, padding never wins) and copies that element's own
// bits, and average pooling adds the same values in the same order; results are bit-identical
// to kernels::ref on every target. Only global average pooling sums a plane across lanes (a
// different f32 order: within a few f32 roundings of the reference, not bit-identical).
//
// Windows that neither overlap nor pad (2x2 stride 2, the CNN's case) read the two input rows
// directly and split them into even and odd columns; every other shape first widens each input
// row into a padded f32 row (padding -Inf for max, 0 for average) and reads it at stride s
// (contiguous loads when s == 1, gathers otherwise).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/pool_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// Plain headers: compiled once (include guards), outside the per-target namespace.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/pool_simd.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {

// Valid input range [begin, end) of the window of output `out` along one axis (as the reference).
struct Span {
  std::int64_t begin, end;
};
inline Span window(std::int64_t out, const Pool2dDesc& d, std::int64_t extent) {
  const std::int64_t start = out * d.stride - d.padding;
  return {std::max<std::int64_t>(start, 0), std::min(start + d.kernel, extent)};
}

// The reference's update rule on lanes: take v where the best so far is not NaN and v is
// strictly greater or NaN (so the first maximum and the first NaN win). The winner's storage
// bits and plane index follow it. (Vectors are passed by reference, never kept in structs or
// arrays: SVE vectors are sizeless.)
template <class D, class VF_, class VU_, class VI_>
HWY_INLINE void Take(D /*df*/, VF_ v, VU_ v_bits, VI_ v_index, VF_& best, VU_& bits, VI_& index) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto t = hn::And(hn::Not(hn::IsNaN(best)), hn::Or(hn::Gt(v, best), hn::IsNaN(v)));
  best = hn::IfThenElse(t, v, best);
  bits = hn::IfThenElse(hn::RebindMask(du, t), v_bits, bits);
  index = hn::IfThenElse(hn::RebindMask(di, t), v_index, index);
}

// Stores the first k lanes of the winners' bits (as elements of T) and indices (if wanted).
template <class D, class T>
void StoreBest(D /*df*/, hn::Vec<hn::RebindToUnsigned<D>> bits, hn::Vec<hn::RebindToSigned<D>> index,
               T* y, std::int32_t* argmax, std::size_t k) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  if (k == hn::Lanes(du)) {
    StoreBits(du, bits, y);
    if (argmax != nullptr) hn::StoreU(index, di, argmax);
    return;
  }
  T ybuf[kMaxF32Lanes];
  std::int32_t ibuf[kMaxF32Lanes];
  StoreBits(du, bits, ybuf);
  hn::StoreU(index, di, ibuf);
  std::memcpy(static_cast<void*>(y), ybuf, k * sizeof(T));
  if (argmax != nullptr) std::memcpy(argmax, ibuf, k * sizeof(std::int32_t));
}

// 2N consecutive elements split into even and odd columns: storage bits of each.
template <class DUx, class T>
void load_even_odd(DUx du, const T* p, hn::Vec<DUx>& even, hn::Vec<DUx>& odd) {
  const std::size_t N = hn::Lanes(du);
  const auto a = LoadBits(du, p), b = LoadBits(du, p + N);
#if HWY_TARGET == HWY_SCALAR
  even = a;  // one lane: element 0 and element 1
  odd = b;
#else
  even = hn::ConcatEven(du, b, a);
  odd = hn::ConcatOdd(du, b, a);
#endif
}

/// The maxima of a vector of 2x2 windows, given their two rows split into even and odd columns
/// (storage bits; `type` only names the dtype) and each window's top-left plane index i00: the
/// winners' bits and plane indices, the reference's visiting order.
template <class D, class T>
HWY_INLINE void Max2x2(D df, const T* type, hn::Vec<hn::RebindToUnsigned<D>> e0,
                       hn::Vec<hn::RebindToUnsigned<D>> o0, hn::Vec<hn::RebindToUnsigned<D>> e1,
                       hn::Vec<hn::RebindToUnsigned<D>> o1, hn::Vec<hn::RebindToSigned<D>> i00,
                       std::int64_t w, hn::Vec<hn::RebindToUnsigned<D>>& bits,
                       hn::Vec<hn::RebindToSigned<D>>& index) {
  const hn::RebindToSigned<D> di;
  const auto one = hn::Set(di, 1);
  const auto w_i = hn::Set(di, static_cast<std::int32_t>(w));
  auto best = WidenBits(df, e0, type);
  bits = e0;
  index = i00;
  Take(df, WidenBits(df, o0, type), o0, hn::Add(i00, one), best, bits, index);
  Take(df, WidenBits(df, e1, type), e1, hn::Add(i00, w_i), best, bits, index);
  Take(df, WidenBits(df, o1, type), o1, hn::Add(hn::Add(i00, w_i), one), best, bits, index);
}

// ---- 2x2 stride 2, no padding ----

/// Outputs [0, wo) of output row oy of one plane with vectors of float tag D: full vectors,
/// then one more ending at the last output, overlapping the one before (those outputs are
/// computed and stored again, with the same result). Returns wo, or 0 when wo is narrower
/// than one vector (the caller then tries a narrower tag).
template <class D, class T>
HWY_INLINE std::int64_t MaxPool2x2Row(D df, const T* row0, const T* row1, std::int64_t oy,
                                      std::int64_t w, std::int64_t wo, T* yrow, std::int32_t* arow) {
  const hn::RebindToSigned<D> di;
  const hn::RebindToUnsigned<D> du;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  if (wo < N) return 0;
  const auto lane2 = hn::ShiftLeft<1>(hn::Iota(di, 0));
  const auto outputs = [&](std::int64_t ox) {
    hn::Vec<decltype(du)> e0, o0, e1, o1, bits;
    load_even_odd(du, row0 + 2 * ox, e0, o0);
    load_even_odd(du, row1 + 2 * ox, e1, o1);
    // Plane index of each window's top-left element: 2 * oy * w + 2 * (ox + lane).
    const auto i00 = hn::Add(hn::Set(di, static_cast<std::int32_t>(2 * oy * w + 2 * ox)), lane2);
    hn::Vec<decltype(di)> index;
    Max2x2(df, row0, e0, o0, e1, o1, i00, w, bits, index);
    StoreBest(df, bits, index, yrow + ox, arow != nullptr ? arow + ox : nullptr,
              static_cast<std::size_t>(N));
  };
  std::int64_t ox = 0;
  for (; ox + N <= wo; ox += N) outputs(ox);
  if (ox < wo) outputs(wo - N);
  return wo;
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// AVX-512 masked loads and stores touch only the selected lanes' memory, so a row narrower than
// a vector (the CNN's 14 and 7 outputs) takes one masked vector instead of two overlapping
// narrower ones.
template <class DU, class T>
HWY_INLINE hn::Vec<DU> LoadBitsN(DU du, const T* p, std::size_t count) {
  if constexpr (sizeof(T) == 4) {
    return hn::MaskedLoad(hn::FirstN(du, count), du, reinterpret_cast<const std::uint32_t*>(p));
  } else {
    const D16<DU> d16;
    return hn::PromoteTo(
        du, hn::MaskedLoad(hn::FirstN(d16, count), d16, reinterpret_cast<const std::uint16_t*>(p)));
  }
}
template <class DU, class T>
HWY_INLINE void StoreBitsN(DU du, hn::Vec<DU> bits, T* p, std::size_t count) {
  if constexpr (sizeof(T) == 4) {
    hn::BlendedStore(bits, hn::FirstN(du, count), du, reinterpret_cast<std::uint32_t*>(p));
  } else {
    const D16<DU> d16;
    hn::BlendedStore(cvt::NarrowU16(du, bits), hn::FirstN(d16, count), d16,
                     reinterpret_cast<std::uint16_t*>(p));
  }
}

/// MaxPool2x2Row for 0 < wo < Lanes(DF): the same lanes, loads and stores masked to the row.
template <class T>
HWY_INLINE void MaxPool2x2RowMasked(const T* row0, const T* row1, std::int64_t oy,
                                    std::int64_t w, std::int64_t wo, T* yrow,
                                    std::int32_t* arow) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const auto N = static_cast<std::size_t>(hn::Lanes(df));
  const auto inputs = static_cast<std::size_t>(2 * wo);  // of each of the two rows
  const std::size_t first = std::min(N, inputs), second = inputs - first;
  const auto even_odd = [&](const T* p, hn::Vec<decltype(du)>& even, hn::Vec<decltype(du)>& odd) {
    const auto a = LoadBitsN(du, p, first), b = LoadBitsN(du, p + N, second);
    even = hn::ConcatEven(du, b, a);
    odd = hn::ConcatOdd(du, b, a);
  };
  hn::Vec<decltype(du)> e0, o0, e1, o1, bits;
  even_odd(row0, e0, o0);
  even_odd(row1, e1, o1);
  const auto i00 = hn::Add(hn::Set(di, static_cast<std::int32_t>(2 * oy * w)),
                           hn::ShiftLeft<1>(hn::Iota(di, 0)));
  hn::Vec<decltype(di)> index;
  Max2x2(df, row0, e0, o0, e1, o1, i00, w, bits, index);
  const auto count = static_cast<std::size_t>(wo);
  StoreBitsN(du, bits, yrow, count);
  if (arow != nullptr) hn::BlendedStore(index, hn::FirstN(di, count), di, arow);
}
#endif

/// One output with the reference's visiting order (rows narrower than any vector tried).
template <class T>
void MaxPool2x2One(const T* row0, const T* row1, std::int64_t oy, std::int64_t ox, std::int64_t w,
                   T* y, std::int32_t* am) {
  const T* cand[4] = {row0 + 2 * ox, row0 + 2 * ox + 1, row1 + 2 * ox, row1 + 2 * ox + 1};
  const std::int32_t idx[4] = {static_cast<std::int32_t>(2 * oy * w + 2 * ox),
                               static_cast<std::int32_t>(2 * oy * w + 2 * ox + 1),
                               static_cast<std::int32_t>((2 * oy + 1) * w + 2 * ox),
                               static_cast<std::int32_t>((2 * oy + 1) * w + 2 * ox + 1)};
  int win = 0;
  float best = static_cast<float>(*cand[0]);
  for (int c = 1; c < 4; ++c) {
    const float v = static_cast<float>(*cand[c]);
    if (!std::isnan(best) && (v > best || std::isnan(v))) {
      best = v;
      win = c;
    }
  }
  std::memcpy(static_cast<void*>(y), cand[win], sizeof(T));
  if (am != nullptr) *am = idx[win];
}

// ---- 2x2 stride 2, no padding ----
template <class T>
void MaxPool2x2T(const Pool2dDesc& d, const T* x, T* y, std::int32_t* argmax, std::int64_t planes) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), w = d.w;
  for (std::int64_t q = 0; q < planes; ++q, x += d.h * w, y += ho * wo) {
    std::int32_t* am = argmax != nullptr ? argmax + q * ho * wo : nullptr;
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      const T* row0 = x + 2 * oy * w;
      const T* row1 = row0 + w;
      T* yrow = y + oy * wo;
      std::int32_t* arow = am != nullptr ? am + oy * wo : nullptr;
      // The widest vectors that fit the row (a CNN's 14 or 7 outputs per row are narrower than
      // an AVX-512 vector: one masked vector there; elsewhere partial vectors would go through
      // buffers, so narrower tags).
      std::int64_t done = MaxPool2x2Row(DF(), row0, row1, oy, w, wo, yrow, arow);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
      if (done == 0 && wo > 0) {
        MaxPool2x2RowMasked(row0, row1, oy, w, wo, yrow, arow);
        done = wo;
      }
#endif
#if HWY_TARGET != HWY_SCALAR
      if (done == 0) done = MaxPool2x2Row(hn::CappedTag<float, 8>(), row0, row1, oy, w, wo, yrow, arow);
      if (done == 0) done = MaxPool2x2Row(hn::CappedTag<float, 4>(), row0, row1, oy, w, wo, yrow, arow);
#endif
      for (std::int64_t ox = done; ox < wo; ++ox) {
        MaxPool2x2One(row0, row1, oy, ox, w, yrow + ox, arow != nullptr ? arow + ox : nullptr);
      }
    }
  }
}
void MaxPool2x2(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax,
                std::int64_t planes) {
  WithDType(static_cast<int>(d.dtype), [&](auto t) {
    using T = Elem<decltype(t)>;
    MaxPool2x2T(d, static_cast<const T*>(x), static_cast<T*>(y), argmax, planes);
  });
}

// ---- any window: padded f32 rows ----

// Padded rows of one input row: f32 values and storage bits at [padding, padding + w); the
// rest keeps its fill. Long enough for full vectors past the last output.
struct PaddedRow {
  std::vector<float> value;
  std::vector<std::uint32_t> bits;
  PaddedRow(const Pool2dDesc& d, float fill) {
    const auto n = static_cast<std::size_t>(d.w + 2 * d.padding +
                                            (d.out_w() + 2 * static_cast<std::int64_t>(kMaxF32Lanes)) * d.stride + d.kernel);
    value.assign(n, fill);
    bits.assign(n, 0u);
  }
  template <class T>
  void load(const T* src, std::int64_t w, std::int64_t padding, bool with_bits) {
    const DF df;
    const DU du;
    const std::size_t N = hn::Lanes(df);
    float* v = value.data() + padding;
    std::uint32_t* b = bits.data() + padding;
    std::int64_t i = 0;
    for (; i + static_cast<std::int64_t>(N) <= w; i += static_cast<std::int64_t>(N)) {
      const auto raw = LoadBits(du, src + i);
      hn::StoreU(WidenBits(df, raw, src), df, v + i);
      if (with_bits) hn::StoreU(raw, du, b + i);
    }
    for (; i < w; ++i) {
      v[i] = static_cast<float>(src[i]);
      std::uint32_t r = 0;
      std::memcpy(&r, src + i, sizeof(T));
      b[i] = r;
    }
  }
};

// Lane values of row[(ox + lane) * s + kx]: contiguous when s == 1, else a gather.
inline hn::Vec<DF> strided(const float* row, std::int64_t s, hn::Vec<DI> offsets) {
  const DF df;
  if (s == 1) return hn::LoadU(df, row);
  return hn::GatherIndex(df, row, offsets);
}
inline hn::Vec<DU> strided(const std::uint32_t* row, std::int64_t s, hn::Vec<DI> offsets) {
  const DU du;
  if (s == 1) return hn::LoadU(du, row);
  return hn::GatherIndex(du, row, offsets);
}

template <class T>
void MaxPoolRowsT(const Pool2dDesc& d, const T* x, T* y, std::int32_t* argmax,
                  std::int64_t planes) {
  const DF df;
  const DU du;
  const DI di;
  const std::size_t N = hn::Lanes(df);
  const std::int64_t ho = d.out_h(), wo = d.out_w(), s = d.stride, p = d.padding, w = d.w;
  // Padding is -Inf: never strictly greater than the best so far, never NaN, so never wins.
  PaddedRow row(d, -INFINITY);
  std::uint32_t neg_inf_bits = 0;
  {
    const T neg_inf(-INFINITY);
    std::memcpy(&neg_inf_bits, &neg_inf, sizeof(T));
  }
  const auto lanes_s = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<std::int32_t>(s)));
  const std::size_t vecs = static_cast<std::size_t>((wo + static_cast<std::int64_t>(N) - 1) / static_cast<std::int64_t>(N));
  // The running winners of one output row, a vector of outputs at a time.
  std::vector<float> best(vecs * N);
  std::vector<std::uint32_t> bits(vecs * N);
  std::vector<std::int32_t> index(vecs * N);
  for (std::int64_t q = 0; q < planes; ++q, x += d.h * w, y += ho * wo) {
    std::int32_t* am = argmax != nullptr ? argmax + q * ho * wo : nullptr;
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      const Span ry = window(oy, d, d.h);
      // Start from -Inf with the index of each window's first real element: if nothing beats
      // -Inf, every element of the window is -Inf and the first one is the reference's winner.
      for (std::size_t v = 0; v < vecs; ++v) {
        const auto ox_s = hn::Set(di, static_cast<std::int32_t>(v * N * s));
        const auto first_col = hn::Max(hn::Sub(hn::Add(ox_s, lanes_s), hn::Set(di, static_cast<std::int32_t>(p))),
                                       hn::Zero(di));
        hn::StoreU(hn::Set(df, -INFINITY), df, best.data() + v * N);
        hn::StoreU(hn::Set(du, neg_inf_bits), du, bits.data() + v * N);
        hn::StoreU(hn::Add(first_col, hn::Set(di, static_cast<std::int32_t>(ry.begin * w))), di,
                   index.data() + v * N);
      }
      for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
        row.load(x + iy * w, w, p, true);
        for (std::int64_t kx = 0; kx < d.kernel; ++kx) {
          // Plane index of padded column c is iy * w + c - p.
          const auto base = hn::Set(di, static_cast<std::int32_t>(iy * w + kx - p));
          for (std::size_t v = 0; v < vecs; ++v) {
            const std::int64_t c0 = static_cast<std::int64_t>(v * N) * s + kx;
            const auto idx = hn::Add(hn::Add(base, hn::Set(di, static_cast<std::int32_t>(v * N * s))), lanes_s);
            auto b = hn::LoadU(df, best.data() + v * N);
            auto bb = hn::LoadU(du, bits.data() + v * N);
            auto bi = hn::LoadU(di, index.data() + v * N);
            Take(DF(), strided(row.value.data() + c0, s, lanes_s), strided(row.bits.data() + c0, s, lanes_s), idx,
                 b, bb, bi);
            hn::StoreU(b, df, best.data() + v * N);
            hn::StoreU(bb, du, bits.data() + v * N);
            hn::StoreU(bi, di, index.data() + v * N);
          }
        }
      }
      for (std::size_t v = 0; v < vecs; ++v) {
        const std::int64_t ox = static_cast<std::int64_t>(v * N);
        const auto k = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(N), wo - ox));
        StoreBest(DF(), hn::LoadU(du, bits.data() + v * N), hn::LoadU(di, index.data() + v * N), y + ox + oy * wo,
                  am != nullptr ? am + oy * wo + ox : nullptr, k);
      }
    }
  }
}

void MaxPoolRows(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax,
                 std::int64_t planes) {
  WithDType(static_cast<int>(d.dtype), [&](auto t) {
    using T = Elem<decltype(t)>;
    MaxPoolRowsT(d, static_cast<const T*>(x), static_cast<T*>(y), argmax, planes);
  });
}

// Window sizes (non-padding elements) of output row oy, per output column, as f32.
void window_counts(const Pool2dDesc& d, Span ry, float* count) {
  for (std::int64_t ox = 0; ox < d.out_w(); ++ox) {
    const Span rx = window(ox, d, d.w);
    count[ox] = static_cast<float>((ry.end - ry.begin) * (rx.end - rx.begin));
  }
}

// ---- average pooling, 2x2 stride 2, no padding: rows read directly ----

/// Outputs [0, wo) of one output row with vectors of tag D, as MaxPool2x2Row (the last vector
/// overlaps the one before); each is 0 + x00 + x01 + x10 + x11, then / 4, the reference's
/// operations in its order (0 + x turns -0 into +0 as the reference's sum does). Returns wo, or
/// 0 when the row is narrower than one vector.
template <class D, class T>
HWY_INLINE std::int64_t AvgPool2x2Row(D df, const T* row0, const T* row1, std::int64_t wo,
                                      T* yrow) {
  const hn::RebindToUnsigned<D> du;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  if (wo < N) return 0;
  const auto four = hn::Set(df, 4.0f);
  const auto outputs = [&](std::int64_t ox) {
    hn::Vec<decltype(du)> e0, o0, e1, o1;
    load_even_odd(du, row0 + 2 * ox, e0, o0);
    load_even_odd(du, row1 + 2 * ox, e1, o1);
    auto sum = hn::Add(hn::Zero(df), WidenBits(df, e0, row0));
    sum = hn::Add(sum, WidenBits(df, o0, row0));
    sum = hn::Add(sum, WidenBits(df, e1, row1));
    sum = hn::Add(sum, WidenBits(df, o1, row1));
    StoreF32(df, hn::Div(sum, four), yrow + ox);
  };
  std::int64_t ox = 0;
  for (; ox + N <= wo; ox += N) outputs(ox);
  if (ox < wo) outputs(wo - N);
  return wo;
}

template <class T>
void AvgPool2x2T(const Pool2dDesc& d, const T* x, T* y, std::int64_t planes) {
  const std::int64_t ho = d.out_h(), wo = d.out_w(), w = d.w;
  for (std::int64_t q = 0; q < planes; ++q, x += d.h * w, y += ho * wo) {
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      const T* row0 = x + 2 * oy * w;
      const T* row1 = row0 + w;
      T* yrow = y + oy * wo;
      std::int64_t done = AvgPool2x2Row(DF(), row0, row1, wo, yrow);
#if HWY_TARGET != HWY_SCALAR
      if (done == 0) done = AvgPool2x2Row(hn::CappedTag<float, 8>(), row0, row1, wo, yrow);
      if (done == 0) done = AvgPool2x2Row(hn::CappedTag<float, 4>(), row0, row1, wo, yrow);
#endif
      for (std::int64_t ox = done; ox < wo; ++ox) {
        float sum = 0.0f;
        for (const T* p : {row0 + 2 * ox, row0 + 2 * ox + 1, row1 + 2 * ox, row1 + 2 * ox + 1}) {
          sum += static_cast<float>(*p);
        }
        yrow[ox] = T(sum / 4.0f);
      }
    }
  }
}

/// Its backward: every input of window (oy, ox) gets 0 + dy / 4 (the reference's scatter into
/// a zeroed plane: each input is in one window, or none past an odd last row or column, which
/// get 0). A row of dy / 4 is widened once; each input column 2 ox + b reads lane ox of it
/// through a table lookup (input lane i from lane i / 2).
template <class T>
void AvgPool2x2BackwardT(const Pool2dDesc& d, const T* dy, T* dx, std::int64_t planes) {
  const DF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t ho = d.out_h(), wo = d.out_w(), w = d.w;
  HWY_ALIGN std::int32_t half[kMaxF32Lanes];
  for (std::int64_t i = 0; i < N; ++i) half[i] = static_cast<std::int32_t>(i / 2);
  const auto spread = hn::SetTableIndices(df, half);
  std::vector<float> g(static_cast<std::size_t>(wo + 2 * N), 0.0f);
  const auto four = hn::Set(df, 4.0f);
  const auto zero_row = [&](T* row, std::int64_t from) {
    for (std::int64_t ix = from; ix < w; ++ix) row[ix] = T(0.0f);
  };
  for (std::int64_t q = 0; q < planes; ++q, dy += ho * wo, dx += d.h * w) {
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      for (std::int64_t ox = 0; ox < wo; ox += N) {
        const auto k = static_cast<std::size_t>(std::min(N, wo - ox));
        hn::StoreU(hn::Add(hn::Zero(df), hn::Div(LoadF32N(df, dy + oy * wo + ox, k), four)), df,
                   g.data() + ox);
      }
      T* row0 = dx + 2 * oy * w;
      T* row1 = row0 + w;
      for (std::int64_t ix = 0; ix < 2 * wo; ix += N) {
        const auto v = hn::TableLookupLanes(hn::LoadU(df, g.data() + ix / 2), spread);
        const auto k = static_cast<std::size_t>(std::min(N, 2 * wo - ix));
        StoreF32N(df, v, row0 + ix, k);
        StoreF32N(df, v, row1 + ix, k);
      }
      zero_row(row0, 2 * wo);
      zero_row(row1, 2 * wo);
    }
    for (std::int64_t iy = 2 * ho; iy < d.h; ++iy) zero_row(dx + iy * w, 0);
  }
}

// Average pooling: each output adds its window's real elements in row-major order like the
// reference; the zero padding adds +0.0, which cannot change an f32 sum that started at +0.0
// (it is never -0.0), so the bits match.
template <class T>
void AvgPoolRowsT(const Pool2dDesc& d, const T* x, T* y, std::int64_t planes) {
  const DF df;
  const DI di;
  const std::size_t N = hn::Lanes(df);
  const std::int64_t ho = d.out_h(), wo = d.out_w(), s = d.stride, w = d.w;
  PaddedRow row(d, 0.0f);
  const auto lanes_s = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<std::int32_t>(s)));
  const std::size_t vecs = static_cast<std::size_t>((wo + static_cast<std::int64_t>(N) - 1) / static_cast<std::int64_t>(N));
  std::vector<float> acc(vecs * N), count(vecs * N, 1.0f);
  for (std::int64_t q = 0; q < planes; ++q, x += d.h * w, y += ho * wo) {
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      const Span ry = window(oy, d, d.h);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
        row.load(x + iy * w, w, d.padding, false);
        for (std::int64_t kx = 0; kx < d.kernel; ++kx) {
          for (std::size_t v = 0; v < vecs; ++v) {
            float* a = acc.data() + v * N;
            const float* src = row.value.data() + static_cast<std::int64_t>(v * N) * s + kx;
            hn::StoreU(hn::Add(hn::LoadU(df, a), strided(src, s, lanes_s)), df, a);
          }
        }
      }
      window_counts(d, ry, count.data());
      for (std::size_t v = 0; v < vecs; ++v) {
        const std::int64_t ox = static_cast<std::int64_t>(v * N);
        const auto k = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(N), wo - ox));
        StoreF32N(df, hn::Div(hn::LoadU(df, acc.data() + v * N), hn::LoadU(df, count.data() + v * N)),
               y + oy * wo + ox, k);
      }
    }
  }
}

bool Is2x2Stride2(const Pool2dDesc& d) { return d.kernel == 2 && d.stride == 2 && d.padding == 0; }

void AvgPoolRows(const Pool2dDesc& d, const void* x, void* y, std::int64_t planes) {
  WithDType(static_cast<int>(d.dtype), [&](auto t) {
    using T = Elem<decltype(t)>;
    if (Is2x2Stride2(d)) return AvgPool2x2T(d, static_cast<const T*>(x), static_cast<T*>(y), planes);
    AvgPoolRowsT(d, static_cast<const T*>(x), static_cast<T*>(y), planes);
  });
}

// Average pooling backward into an f32 plane with padded rows. For each input element the
// contributions arrive window by window in row-major order, as in the reference: oy ascends in
// the outer loop and, within a row, kx descends so that ox ascends for a fixed input column.
// Lanes of one vector hold different windows (ox), so they never hit the same element.
template <class T>
void AvgPoolBackwardRowsT(const Pool2dDesc& d, const T* dy, T* dx, std::int64_t planes) {
  const DF df;
  const DI di;
  const std::size_t N = hn::Lanes(df);
  const std::int64_t ho = d.out_h(), wo = d.out_w(), s = d.stride, p = d.padding, w = d.w;
  const std::size_t vecs = static_cast<std::size_t>((wo + static_cast<std::int64_t>(N) - 1) / static_cast<std::int64_t>(N));
  const std::int64_t pitch = w + 2 * p + static_cast<std::int64_t>(vecs * N + 1) * s + d.kernel;
  const auto lanes_s = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<std::int32_t>(s)));
  std::vector<float> acc(static_cast<std::size_t>(d.h * pitch));
  std::vector<float> g(vecs * N, 0.0f), count(vecs * N, 1.0f);  // lanes past wo add +0
  for (std::int64_t q = 0; q < planes; ++q, dy += ho * wo, dx += d.h * w) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::int64_t oy = 0; oy < ho; ++oy) {
      const Span ry = window(oy, d, d.h);
      window_counts(d, ry, count.data());
      for (std::size_t v = 0; v < vecs; ++v) {
        const std::int64_t ox = static_cast<std::int64_t>(v * N);
        const auto k = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(N), wo - ox));
        const auto gv = hn::Div(LoadF32N(df, dy + oy * wo + ox, k), hn::LoadU(df, count.data() + v * N));
        hn::StoreU(hn::IfThenElseZero(hn::FirstN(df, k), gv), df, g.data() + v * N);
      }
      for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
        float* row = acc.data() + iy * pitch;
        for (std::int64_t kx = d.kernel - 1; kx >= 0; --kx) {
          for (std::size_t v = 0; v < vecs; ++v) {
            float* dst = row + static_cast<std::int64_t>(v * N) * s + kx;
            const auto gv = hn::LoadU(df, g.data() + v * N);
            if (s == 1) {
              hn::StoreU(hn::Add(hn::LoadU(df, dst), gv), df, dst);
            } else {
              hn::ScatterIndex(hn::Add(hn::GatherIndex(df, dst, lanes_s), gv), df, dst, lanes_s);
            }
          }
        }
      }
    }
    for (std::int64_t iy = 0; iy < d.h; ++iy) {
      const float* src = acc.data() + iy * pitch + p;
      for (std::int64_t ix = 0; ix < w; ix += static_cast<std::int64_t>(N)) {
        const auto k = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(N), w - ix));
        StoreF32N(df, hn::LoadU(df, src + ix), dx + iy * w + ix, k);
      }
    }
  }
}

void AvgPoolBackwardRows(const Pool2dDesc& d, const void* dy, void* dx, std::int64_t planes) {
  WithDType(static_cast<int>(d.dtype), [&](auto t) {
    using T = Elem<decltype(t)>;
    if (Is2x2Stride2(d)) {
      return AvgPool2x2BackwardT(d, static_cast<const T*>(dy), static_cast<T*>(dx), planes);
    }
    AvgPoolBackwardRowsT(d, static_cast<const T*>(dy), static_cast<T*>(dx), planes);
  });
}

// ---- channels-last (NHWC): lanes across one pixel's channels ----
// A pixel's C values are contiguous, so a window step is one vector load per block of channels
// and no deinterleaving: every lane is its own channel, visiting its window in the reference's
// row-major order with Take (first maximum, first NaN) and keeping the winner's bits.

/// Channels [j, j + Lanes(df)) of the output pixel whose window spans rows ry and columns rx
/// of `sample` (an [h, w, c] image).
template <class D, class T>
HWY_INLINE void MaxPoolPixelLanes(D df, const T* sample, std::int64_t c, std::int64_t w, Span ry,
                                  Span rx, std::int64_t j, T* y, std::int32_t* am) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const std::int64_t first = ry.begin * w + rx.begin;
  auto bits = LoadBits(du, sample + first * c + j);
  auto best = WidenBits(df, bits, sample);
  auto index = hn::Set(di, static_cast<std::int32_t>(first));
  for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
    for (std::int64_t ix = iy == ry.begin ? rx.begin + 1 : rx.begin; ix < rx.end; ++ix) {
      const std::int64_t k = iy * w + ix;
      const auto v_bits = LoadBits(du, sample + k * c + j);
      Take(df, WidenBits(df, v_bits, sample), v_bits, hn::Set(di, static_cast<std::int32_t>(k)),
           best, bits, index);
    }
  }
  StoreBits(du, bits, y + j);
  if (am != nullptr) hn::StoreU(index, di, am + j);
}

// Calls block(tag, j) over channels [0, c): full vectors, then narrower ones down to one lane,
// so any channel count takes the same per-lane code.
template <class Block>
HWY_INLINE void OverChannelBlocks(std::int64_t c, Block&& block) {
  std::int64_t j = 0;
  const auto blocks_of = [&](auto tag) {
    const auto n = static_cast<std::int64_t>(hn::Lanes(tag));
    for (; j + n <= c; j += n) block(tag, j);
  };
  blocks_of(DF());
#if HWY_TARGET != HWY_SCALAR
  blocks_of(hn::CappedTag<float, 8>());
  blocks_of(hn::CappedTag<float, 4>());
  blocks_of(hn::CappedTag<float, 1>());
#endif
}

template <class T>
void MaxPoolChannelsLastRowT(const Pool2dDesc& d, const T* sample, std::int64_t oy, T* y,
                             std::int32_t* am) {
  const std::int64_t c = d.c;
  const Span ry = window(oy, d, d.h);
  for (std::int64_t ox = 0; ox < d.out_w(); ++ox) {
    const Span rx = window(ox, d, d.w);
    std::int32_t* am_pixel = am != nullptr ? am + ox * c : nullptr;
    OverChannelBlocks(c, [&](auto tag, std::int64_t j) {
      MaxPoolPixelLanes(tag, sample, c, d.w, ry, rx, j, y + ox * c, am_pixel);
    });
  }
}
void MaxPoolChannelsLastRow(const Pool2dDesc& d, const void* sample, std::int64_t oy, void* y,
                            std::int32_t* argmax) {
  WithDType(static_cast<int>(d.dtype), [&](auto t) {
    using T = Elem<decltype(t)>;
    MaxPoolChannelsLastRowT(d, static_cast<const T*>(sample), oy, static_cast<T*>(y), argmax);
  });
}

/// Backward of disjoint windows (stride >= kernel, no padding) for output row oy: every input
/// pixel of its windows is written once, 0 + dy where it is its window's argmax and +0
/// elsewhere (the reference's sums); pixels outside every window are the caller's to zero.
template <class T>
void MaxPoolBackwardChannelsLastRowT(const Pool2dDesc& d, const T* dy, const std::int32_t* am,
                                     std::int64_t oy, T* dx_sample) {
  const std::int64_t c = d.c;
  const Span ry = window(oy, d, d.h);
  for (std::int64_t ox = 0; ox < d.out_w(); ++ox) {
    const Span rx = window(ox, d, d.w);
    OverChannelBlocks(c, [&](auto tag, std::int64_t j) {
      const hn::RebindToSigned<decltype(tag)> di;
      // 0 + dy in f32 turns -0 into +0 and quiets a NaN, as the reference's accumulator does.
      const auto g = hn::Add(hn::Zero(tag), LoadF32(tag, dy + ox * c + j));
      const auto index = hn::LoadU(di, am + ox * c + j);
      for (std::int64_t iy = ry.begin; iy < ry.end; ++iy) {
        for (std::int64_t ix = rx.begin; ix < rx.end; ++ix) {
          const std::int64_t k = iy * d.w + ix;
          const auto hit = hn::RebindMask(tag, hn::Eq(index, hn::Set(di, static_cast<std::int32_t>(k))));
          StoreF32(tag, hn::IfThenElseZero(hit, g), dx_sample + k * c + j);
        }
      }
    });
  }
}
void MaxPoolBackwardChannelsLastRow(const Pool2dDesc& d, const void* dy, const std::int32_t* argmax,
                                    std::int64_t oy, void* dx_sample) {
  WithDType(static_cast<int>(d.dtype), [&](auto t) {
    using T = Elem<decltype(t)>;
    MaxPoolBackwardChannelsLastRowT(d, static_cast<const T*>(dy), argmax, oy,
                                    static_cast<T*>(dx_sample));
  });
}

// ---- global average pooling: a plane summed across lanes ----

template <class T>
void PlaneMeansT(const T* x, std::int64_t planes, std::int64_t hw, T* y) {
  const DF df;
  const std::size_t N = hn::Lanes(df);
  const auto len = static_cast<std::size_t>(hw);
  for (std::int64_t q = 0; q < planes; ++q, x += hw) {
    auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
    std::size_t i = 0;
    for (; i + 4 * N <= len; i += 4 * N) {
      a0 = hn::Add(a0, LoadF32(df, x + i));
      a1 = hn::Add(a1, LoadF32(df, x + i + N));
      a2 = hn::Add(a2, LoadF32(df, x + i + 2 * N));
      a3 = hn::Add(a3, LoadF32(df, x + i + 3 * N));
    }
    for (; i < len; i += N) a0 = hn::Add(a0, LoadF32N(df, x + i, std::min(N, len - i)));  // tail lanes 0
    const float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
    y[q] = T(sum / static_cast<float>(hw));  // 0/0 = NaN for empty planes, as the reference
  }
}

void PlaneMeans(int t, const void* x, std::int64_t planes, std::int64_t hw, void* y) {
  WithDType(t, [&](auto tag) {
    using T = Elem<decltype(tag)>;
    PlaneMeansT(static_cast<const T*>(x), planes, hw, static_cast<T*>(y));
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mixprec::kernels::cpu {
HWY_EXPORT(MaxPool2x2);
HWY_EXPORT(MaxPoolRows);
HWY_EXPORT(AvgPoolRows);
HWY_EXPORT(AvgPoolBackwardRows);
HWY_EXPORT(PlaneMeans);
HWY_EXPORT(MaxPoolChannelsLastRow);
HWY_EXPORT(MaxPoolBackwardChannelsLastRow);

namespace pool_simd {
void max_pool_2x2(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax,
                  std::int64_t planes) {
  HWY_DYNAMIC_DISPATCH(MaxPool2x2)(d, x, y, argmax, planes);
}
void max_pool_rows(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax,
                   std::int64_t planes) {
  HWY_DYNAMIC_DISPATCH(MaxPoolRows)(d, x, y, argmax, planes);
}
void avg_pool_rows(const Pool2dDesc& d, const void* x, void* y, std::int64_t planes) {
  HWY_DYNAMIC_DISPATCH(AvgPoolRows)(d, x, y, planes);
}
void avg_pool_backward_rows(const Pool2dDesc& d, const void* dy, void* dx, std::int64_t planes) {
  HWY_DYNAMIC_DISPATCH(AvgPoolBackwardRows)(d, dy, dx, planes);
}
void plane_means(const void* x, DType t, std::int64_t planes, std::int64_t hw, void* y) {
  HWY_DYNAMIC_DISPATCH(PlaneMeans)(static_cast<int>(t), x, planes, hw, y);
}
void max_pool_channels_last_row(const Pool2dDesc& d, const void* sample, std::int64_t oy,
                                void* y_row, std::int32_t* argmax_row) {
  HWY_DYNAMIC_DISPATCH(MaxPoolChannelsLastRow)(d, sample, oy, y_row, argmax_row);
}
void max_pool_backward_channels_last_row(const Pool2dDesc& d, const void* dy_row,
                                         const std::int32_t* argmax_row, std::int64_t oy,
                                         void* dx_sample) {
  HWY_DYNAMIC_DISPATCH(MaxPoolBackwardChannelsLastRow)(d, dy_row, argmax_row, oy, dx_sample);
}
}  // namespace pool_simd
}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
