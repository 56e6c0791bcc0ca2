// The CPU backend's bulk conversions, written once over Highway and compiled for every target:
// any pair of f32/bf16/f16/fp8 (exact widening to f32 in registers, one rounding to nearest
// even), stochastic rounding f32 -> bf16/f16 and the Philox bit stream of random.h, with the
// Philox rounds computed in the vector registers. Every lane computes exactly what the scalar
// definitions of half.h, float8.h, random.h and convert.h compute, so results are bit-identical
// to the reference backend on every target (integer lane arithmetic; the only floating-point
// operations are exact or a single IEEE addition whose round-to-nearest-even is the rounding).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/convert_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "mixprec/core/dtype.h"
#include "mixprec/core/float8.h"
#include "mixprec/core/half.h"
#include "mixprec/core/random.h"
#include "kernels/spec/fp8_scale_math.h"

HWY_BEFORE_NAMESPACE();
namespace mixprec::kernels::cpu {
namespace HWY_NAMESPACE {
namespace {

// ---------------------------------------------------------------------------------------------
// Any pair of dtypes: LoadF32 widens exactly, StoreF32 rounds once (convert-inl.h covers f32,
// bf16, f16 and both fp8 formats).

template <typename S, typename D>
void ConvertSpan(const S* HWY_RESTRICT src, D* HWY_RESTRICT dst, std::size_t n) {
  const DF d;
  const std::size_t lanes = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) StoreF32(d, LoadF32(d, src + i), dst + i);
  if (i < n) StoreF32N(d, LoadF32N(d, src + i, n - i), dst + i, n - i);
}

template <typename S>
void ConvertFrom(const S* src, void* dst, DType dst_dtype, std::size_t n) {
  switch (dst_dtype) {
    case DType::f32: return ConvertSpan(src, static_cast<float*>(dst), n);
    case DType::bf16: return ConvertSpan(src, static_cast<bfloat16*>(dst), n);
    case DType::f16: return ConvertSpan(src, static_cast<float16*>(dst), n);
    case DType::f8e4m3: return ConvertSpan(src, static_cast<float8_e4m3*>(dst), n);
    case DType::f8e5m2: return ConvertSpan(src, static_cast<float8_e5m2*>(dst), n);
  }
}

// ---------------------------------------------------------------------------------------------
// Philox4x32-10 in vector registers. Lane j of a u32 vector holds word j % 4 of block
// first + j / 4, which is also the order of the output stream, so a finished vector is stored
// as is. One round maps the words (c0, c1, c2, c3) of a block to
//   (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2), hi(M0 c0) ^ c3 ^ k1, lo(M0 c0)):
// MulEven multiplies lanes 0 and 2 of each group into 64-bit products, which viewed as u32 are
// (lo0, hi0, lo1, hi1); Reverse4 turns them into (hi1, lo1, hi0, lo0); and shifting the 64-bit
// pairs right by 32 moves c1 and c3 under them.

#if HWY_TARGET != HWY_SCALAR  // a one-lane vector holds no block: HWY_SCALAR uses random.h
/// The stream words of the blocks whose numbers sit in the even u64 lanes of `blocks` (the odd
/// u64 lanes hold zero: the block counter is (number lo, number hi, 0, 0)).
template <class V64>
HWY_INLINE VU PhiloxWords(V64 blocks, std::uint64_t seed) {
  const DU du;
  const hn::Repartition<std::uint64_t, DU> d64;
  const auto multiplier =
      hn::BitCast(du, hn::OddEven(hn::Set(d64, 0xCD9E8D57u), hn::Set(d64, 0xD2511F53u)));
  const auto bump =
      hn::BitCast(du, hn::OddEven(hn::Set(d64, 0xBB67AE85u), hn::Set(d64, 0x9E3779B9u)));
  VU key = hn::BitCast(du, hn::OddEven(hn::Set(d64, seed >> 32), hn::Set(d64, seed & 0xffffffffu)));
  VU c = hn::BitCast(du, blocks);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) key = hn::Add(key, bump);  // bumped between rounds, not before the first
    const VU products = hn::BitCast(du, hn::MulEven(c, multiplier));
    const VU odd_words = hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(d64, c)));
    c = hn::Xor(hn::Reverse4(du, products), hn::Xor(odd_words, key));
  }
  return c;
}

/// Block numbers first, first + 1, ... in the even u64 lanes (one block per four u32 lanes).
HWY_INLINE hn::Vec<hn::Repartition<std::uint64_t, DU>> FirstBlocks(std::uint64_t first) {
  const hn::Repartition<std::uint64_t, DU> d64;
  const auto numbers = hn::Add(hn::Set(d64, first), hn::ShiftRight<1>(hn::Iota(d64, 0)));
  return hn::OddEven(hn::Zero(d64), numbers);
}

/// What FirstBlocks advances by per vector of u32 lanes.
HWY_INLINE hn::Vec<hn::Repartition<std::uint64_t, DU>> BlockStep() {
  const hn::Repartition<std::uint64_t, DU> d64;
  return hn::OddEven(hn::Zero(d64), hn::Set(d64, hn::Lanes(DU()) / 4));
}
#endif

/// out[0, count) = random_bits(seed, offset + k) from the scalar definition, one Philox block per
/// four elements.
void FillBitsScalar(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out,
                    std::size_t count) {
  std::size_t i = 0;
  while (i < count) {
    const std::uint64_t index = offset + i;
    const Philox::Counter block = Philox::block(seed, index / 4);
    for (std::size_t word = index % 4; word < 4 && i < count; ++word, ++i) out[i] = block[word];
  }
}

// ---------------------------------------------------------------------------------------------
// Stochastic rounding of f32 lanes with 32 random bits per lane (convert-inl.h).

template <bool kBf16>
HWY_INLINE hn::Vec<D16<DF>> RoundStochastic(hn::Vec<DF> x, VU random) {
  if constexpr (kBf16) {
    return NarrowBF16Stochastic(DF(), x, random);
  } else {
    return NarrowF16Stochastic(DF(), x, random);
  }
}

/// Elements whose random bits are not a whole vector of blocks (up to three before a block
/// boundary, the tail, and everything on HWY_SCALAR): the bits come from random.h, the rounding
/// is the same vector code, through stack buffers of kGroup elements.
constexpr std::size_t kGroup = 64;

template <bool kBf16>
void StochasticBuffered(const float* HWY_RESTRICT src, std::uint16_t* HWY_RESTRICT dst,
                        std::size_t count, std::uint64_t seed, std::uint64_t offset) {
  const DU du;
  const hn::Rebind<std::uint16_t, DU> d16;
  const std::size_t lanes = hn::Lanes(du);
  constexpr std::size_t kSize = kGroup + hn::MaxLanes(DU());
  HWY_ALIGN float x[kSize] = {};
  HWY_ALIGN std::uint32_t random[kSize] = {};
  HWY_ALIGN std::uint16_t out[kSize];
  for (std::size_t done = 0; done < count; done += kGroup) {
    const std::size_t m = std::min(kGroup, count - done);
    std::memcpy(x, src + done, m * sizeof(float));
    FillBitsScalar(seed, offset + done, random, m);
    for (std::size_t k = 0; k < m; k += lanes) {
      hn::Store(RoundStochastic<kBf16>(hn::Load(DF(), x + k), hn::Load(du, random + k)), d16,
                out + k);
    }
    std::memcpy(dst + done, out, m * sizeof(std::uint16_t));
  }
}

template <bool kBf16>
void StochasticSpan(const float* HWY_RESTRICT src, std::uint16_t* HWY_RESTRICT dst,
                    std::size_t n, std::uint64_t seed, std::uint64_t offset) {
  // The vector loop starts on a block boundary, where lane j meets word j % 4.
  const std::size_t head = std::min<std::size_t>(n, (4 - offset % 4) % 4);
  StochasticBuffered<kBf16>(src, dst, head, seed, offset);
  std::size_t i = head;
#if HWY_TARGET != HWY_SCALAR
  const DF df;
  const DU du;
  const hn::Rebind<std::uint16_t, DU> d16;
  const std::size_t lanes = hn::Lanes(du);
  auto blocks = FirstBlocks((offset + i) / 4);
  const auto step = BlockStep();
  for (; i + lanes <= n; i += lanes) {
    const VU random = PhiloxWords(blocks, seed);
    blocks = hn::Add(blocks, step);
    hn::StoreU(RoundStochastic<kBf16>(hn::LoadU(df, src + i), random), d16, dst + i);
  }
#endif
  StochasticBuffered<kBf16>(src + i, dst + i, n - i, seed, offset + i);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Per-target entry points (HWY_EXPORT below). The callers split large arrays into chunks.

/// n elements from src_dtype to dst_dtype, two different dtypes.
void ConvertPair(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  switch (src_dtype) {
    case DType::f32: return ConvertFrom(static_cast<const float*>(src), dst, dst_dtype, n);
    case DType::bf16: return ConvertFrom(static_cast<const bfloat16*>(src), dst, dst_dtype, n);
    case DType::f16: return ConvertFrom(static_cast<const float16*>(src), dst, dst_dtype, n);
    case DType::f8e4m3:
      return ConvertFrom(static_cast<const float8_e4m3*>(src), dst, dst_dtype, n);
    case DType::f8e5m2:
      return ConvertFrom(static_cast<const float8_e5m2*>(src), dst, dst_dtype, n);
  }
}

/// A same-dtype "conversion": a copy of non-overlapping byte ranges.
void CopyBytes(const std::uint8_t* HWY_RESTRICT src, std::uint8_t* HWY_RESTRICT dst,
               std::size_t bytes) {
  const hn::ScalableTag<std::uint8_t> d;
  const std::size_t lanes = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + lanes <= bytes; i += lanes) hn::StoreU(hn::LoadU(d, src + i), d, dst + i);
  if (i < bytes) std::memcpy(dst + i, src + i, bytes - i);
}

// ---------------------------------------------------------------------------------------------
// The fp8 recipes' scaled cast: x * scale in f32, clamped to +-max (NaN passes the comparisons
// and stays NaN), one rounding by F32ToFp8Bits; the amax a max of |x|'s bit patterns.
// fp8_scale_math.h's scaled_cast and abs_bits, lane by lane.

template <bool kE4m3, typename T>
std::uint32_t ScaledCastFp8T(const T* HWY_RESTRICT in, std::uint8_t* HWY_RESTRICT out,
                             std::size_t n, float scale) {
  using Fp8 = std::conditional_t<kE4m3, float8_e4m3, float8_e5m2>;
  const DF d;
  const DU du;
  const std::size_t lanes = hn::Lanes(d);
  const float max = fp8_math::fp8_max(kE4m3);
  const auto hi = hn::Set(d, max), lo = hn::Set(d, -max), s = hn::Set(d, scale);
  const auto abs_mask = hn::Set(du, 0x7fffffffu);
  auto* q = reinterpret_cast<Fp8*>(out);
  auto amax = hn::Zero(du);
  const auto step = [&](hn::Vec<DF> v, std::size_t i, std::size_t count) {
    amax = hn::Max(amax, hn::And(hn::BitCast(du, v), abs_mask));
    if (out == nullptr) return;
    const auto p = hn::Mul(v, s);
    // StoreF32 rounds to the fp8 format once, as the plain conversion does.
    StoreF32N(d, hn::IfThenElse(hn::Gt(p, hi), hi, hn::IfThenElse(hn::Lt(p, lo), lo, p)), q + i,
              count);
  };
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) step(LoadF32(d, in + i), i, lanes);
  // The tail's missing lanes load as 0: |0| never raises the amax, and they are not stored.
  if (i < n) step(LoadF32N(d, in + i, n - i), i, n - i);
  return hn::GetLane(hn::MaxOfLanes(du, amax));
}

std::uint32_t ScaledCastFp8(int dtype, const void* in, std::uint8_t* out, std::size_t n, float scale,
                            bool e4m3) {
  std::uint32_t m = 0;
  WithDType(dtype, [&](auto t) {
    using T = Elem<decltype(t)>;
    const auto* x = static_cast<const T*>(in);
    m = e4m3 ? ScaledCastFp8T<true>(x, out, n, scale) : ScaledCastFp8T<false>(x, out, n, scale);
  });
  return m;
}

/// Stochastic f32 -> bf16 (dst_bf16) or f16 with random_bits(seed, offset + i).
void ConvertStochastic(const float* src, std::uint16_t* dst, bool dst_bf16, std::size_t n,
                       std::uint64_t seed, std::uint64_t offset) {
  if (dst_bf16) {
    StochasticSpan<true>(src, dst, n, seed, offset);
  } else {
    StochasticSpan<false>(src, dst, n, seed, offset);
  }
}

/// out[i] = random_bits(seed, offset + i).
void FillRandomBits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n) {
  const std::size_t head = std::min<std::size_t>(n, (4 - offset % 4) % 4);
  FillBitsScalar(seed, offset, out, head);
  std::size_t i = head;
#if HWY_TARGET != HWY_SCALAR
  const DU du;
  const std::size_t lanes = hn::Lanes(du);
  auto blocks = FirstBlocks((offset + i) / 4);
  const auto step = BlockStep();
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(PhiloxWords(blocks, seed), du, out + i);
    blocks = hn::Add(blocks, step);
  }
#endif
  FillBitsScalar(seed, offset + i, out + i, n - i);
}

}  // namespace HWY_NAMESPACE
}  // namespace mixprec::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/parallel_chunks.h"
#include "kernels/convert.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/fp8_cast_simd.h"

namespace mixprec::kernels::cpu {

HWY_EXPORT(ConvertPair);
HWY_EXPORT(CopyBytes);
HWY_EXPORT(ConvertStochastic);
HWY_EXPORT(FillRandomBits);
HWY_EXPORT(ScaledCastFp8);

// Large arrays run on all threads in fixed chunks of detail::kConvertChunk elements (a multiple
// of 4, so every chunk but the first starts on a Philox block boundary when offset does): each
// element's result depends only on its own input and counter, never on the split.

void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t n) {
  const std::size_t src_size = size_of(src_dtype);
  const std::size_t dst_size = size_of(dst_dtype);
  if (src_dtype == dst_dtype) {  // a copy; overlapping ranges (allowed here) take memmove
    const auto s = reinterpret_cast<std::uintptr_t>(src);
    const auto d = reinterpret_cast<std::uintptr_t>(dst);
    const std::size_t bytes = n * src_size;
    if (n > 0 && s < d + bytes && d < s + bytes) {
      if (verbose_enabled()) verbose_log("convert", name(src_dtype), "memmove", "ranges overlap");
      if (src != dst) std::memmove(dst, src, bytes);
      return;
    }
    log_simd("convert", name(src_dtype));
    detail::for_chunks(n, [&](std::size_t begin, std::size_t end) {
      HWY_DYNAMIC_DISPATCH(CopyBytes)(static_cast<const std::uint8_t*>(src) + begin * src_size,
                                      static_cast<std::uint8_t*>(dst) + begin * src_size,
                                      (end - begin) * src_size);
    });
    return;
  }
  log_simd("convert", dtype_label(src_dtype, dst_dtype));
  detail::for_chunks(n, [&](std::size_t begin, std::size_t end) {
    HWY_DYNAMIC_DISPATCH(ConvertPair)(static_cast<const char*>(src) + begin * src_size, src_dtype,
                                      static_cast<char*>(dst) + begin * dst_size, dst_dtype,
                                      end - begin);
  });
}

void convert_stochastic(const float* src, void* dst, DType dst_dtype, std::size_t n,
                        std::uint64_t seed, std::uint64_t offset) {
  log_simd("convert_stochastic", dtype_label(DType::f32, dst_dtype));
  auto* out = static_cast<std::uint16_t*>(dst);
  const bool bf16 = dst_dtype == DType::bf16;
  detail::for_chunks(n, [&](std::size_t begin, std::size_t end) {
    HWY_DYNAMIC_DISPATCH(ConvertStochastic)(src + begin, out + begin, bf16, end - begin, seed,
                                            offset + begin);
  });
}

std::uint32_t fp8_scaled_cast_span(const void* x, DType x_dtype, std::uint8_t* out, std::size_t n,
                                   float scale, bool e4m3) {
  return HWY_DYNAMIC_DISPATCH(ScaledCastFp8)(static_cast<int>(x_dtype), x, out, n, scale, e4m3);
}

void philox_fill(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n) {
  detail::for_chunks(n, [&](std::size_t begin, std::size_t end) {
    HWY_DYNAMIC_DISPATCH(FillRandomBits)(seed, offset + begin, out + begin, end - begin);
  });
}

}  // namespace mixprec::kernels::cpu
#endif  // HWY_ONCE
