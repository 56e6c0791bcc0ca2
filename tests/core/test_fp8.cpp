// FP8 (E4M3, E5M2) storage dtypes: the table rows against the OCP definitions, bit-exact decode
// of all 256 patterns and encode of every rounding boundary against the independent
// double-precision quantiser of numerics/formats.h, conversions from and to bf16/f16, tensors
// (creation, casts, views, printing), the straight-through gradient of casts, and the
// DTypeError every computing op raises for an fp8 operand.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/convert_test_util.h"
#include "io/io_test_util.h"
#include "kernels/conv.h"
#include "kernels/elementwise.h"
#include "kernels/norm.h"
#include "kernels/reduce.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/amp/precision.h"
#include "mixprec/runtime/anomaly.h"
#include "mixprec/core/fp8_table.h"
#include "mixprec/kernels/convert_arrays.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/float8.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/data/dataset.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/nn/layers.h"
#include "mixprec/numerics/formats.h"
#include "mixprec/ops/combine.h"
#include "mixprec/ops/conv.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/normalization.h"
#include "mixprec/ops/reduce.h"

namespace mixprec {
namespace {

constexpr DType kFp8[] = {DType::f8e4m3, DType::f8e5m2};

std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }

/// The independent reference: numerics/formats.h's exact quantiser, run in double.
std::uint8_t ref_encode(float x, DType t) {
  const double d = static_cast<double>(x);
  return t == DType::f8e4m3 ? numerics::encode_e4m3(d) : numerics::encode_e5m2(d);
}
double ref_decode(std::uint8_t b, DType t) {
  return t == DType::f8e4m3 ? numerics::decode_e4m3(b) : numerics::decode_e5m2(b);
}
std::uint8_t encode(float x, DType t) {
  return t == DType::f8e4m3 ? f32_to_e4m3_bits(x) : f32_to_e5m2_bits(x);
}
float decode(std::uint8_t b, DType t) {
  return t == DType::f8e4m3 ? e4m3_bits_to_f32(b) : e5m2_bits_to_f32(b);
}

/// Same value, or both NaN; and the same sign bit (so -0 and NaN signs count).
void expect_same(double got, double want, const std::string& where) {
  EXPECT_EQ(std::signbit(got), std::signbit(want)) << where;
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << where << ": got " << got;
  } else {
    EXPECT_EQ(got, want) << where;
  }
}

std::string hex(std::uint32_t b) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", b);
  return buf;
}

// ---- the table ------------------------------------------------------------------------------

TEST(Fp8DType, TableRowsMatchTheOcpDefinitions) {
  const DTypeTraits& e4 = traits(DType::f8e4m3);
  EXPECT_STREQ(e4.name, "f8e4m3");
  EXPECT_EQ(e4.size, 1u);
  EXPECT_EQ(e4.exponent_bits, 4);
  EXPECT_EQ(e4.mantissa_bits, 3);
  EXPECT_EQ(e4.max, 448.0);  // S.1111.110 = 1.75 * 2^8; S.1111.111 is NaN
  EXPECT_EQ(e4.max, 1.75 * std::ldexp(1.0, 8));
  EXPECT_EQ(e4.min_normal, std::ldexp(1.0, -6));
  EXPECT_EQ(e4.min_subnormal, std::ldexp(1.0, -9));
  EXPECT_EQ(e4.epsilon, std::ldexp(1.0, -3));
  EXPECT_FALSE(e4.has_inf);
  EXPECT_TRUE(e4.storage_only);

  const DTypeTraits& e5 = traits(DType::f8e5m2);
  EXPECT_STREQ(e5.name, "f8e5m2");
  EXPECT_EQ(e5.size, 1u);
  EXPECT_EQ(e5.exponent_bits, 5);
  EXPECT_EQ(e5.mantissa_bits, 2);
  EXPECT_EQ(e5.max, 57344.0);  // S.11110.11 = 1.75 * 2^15
  EXPECT_EQ(e5.max, 1.75 * std::ldexp(1.0, 15));
  EXPECT_EQ(e5.min_normal, std::ldexp(1.0, -14));
  EXPECT_EQ(e5.min_subnormal, std::ldexp(1.0, -16));
  EXPECT_EQ(e5.epsilon, std::ldexp(1.0, -2));
  EXPECT_TRUE(e5.has_inf);
  EXPECT_TRUE(e5.storage_only);

  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    EXPECT_TRUE(traits(t).has_inf) << name(t);
    EXPECT_FALSE(is_storage_only(t)) << name(t);
    EXPECT_EQ(gradient_dtype(t), t);
  }
  for (DType t : kFp8) {
    EXPECT_EQ(traits(t).accumulation, DType::f32);
    EXPECT_EQ(gradient_dtype(t), DType::f32);
    // The largest finite pattern and the smallest subnormal decode to the table's numbers.
    const std::uint8_t max_bits = t == DType::f8e4m3 ? 0x7e : 0x7b;
    EXPECT_EQ(static_cast<double>(decode(max_bits, t)), traits(t).max);
    EXPECT_EQ(static_cast<double>(decode(0x01, t)), traits(t).min_subnormal);
    const auto min_normal_bits = static_cast<std::uint8_t>(1u << traits(t).mantissa_bits);
    EXPECT_EQ(static_cast<double>(decode(min_normal_bits, t)), traits(t).min_normal);
  }
}

TEST(Fp8DType, AgreesWithTheNumericsFormatTable) {
  const std::pair<DType, numerics::Format> pairs[] = {
      {DType::f8e4m3, numerics::Format::fp8_e4m3}, {DType::f8e5m2, numerics::Format::fp8_e5m2}};
  for (const auto& [t, f] : pairs) {
    const numerics::FormatInfo& info = numerics::format_info(f);
    EXPECT_EQ(traits(t).max, info.max);
    EXPECT_EQ(traits(t).min_normal, info.min_normal);
    EXPECT_EQ(traits(t).min_subnormal, info.min_subnormal);
    EXPECT_EQ(traits(t).epsilon, info.epsilon);
    EXPECT_EQ(traits(t).has_inf, info.has_inf);
  }
}

TEST(Fp8DType, ParsesNamesAndAliases) {
  for (const char* s : {"f8e4m3", "fp8_e4m3", "e4m3", "float8_e4m3fn"}) {
    EXPECT_EQ(parse_dtype(s), DType::f8e4m3) << s;
  }
  for (const char* s : {"f8e5m2", "fp8_e5m2", "e5m2", "float8_e5m2"}) {
    EXPECT_EQ(parse_dtype(s), DType::f8e5m2) << s;
  }
  EXPECT_THROW(parse_dtype("fp8"), ValueError);  // ambiguous: which format?
  EXPECT_THROW(parse_dtype("float8_e4m3fnuz"), ValueError);
  try {
    parse_dtype("f8");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("f8e4m3, f8e5m2"), std::string::npos) << e.what();
  }
}

TEST(Fp8DType, DispatchThrowsInsteadOfInstantiatingKernels) {
  for (DType t : kFp8) {
    bool called = false;
    try {
      dispatch(t, [&](auto) { called = true; });
      FAIL() << "expected DTypeError for " << name(t);
    } catch (const DTypeError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name(t)) + " is a storage dtype"),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(called);
  }
}

// ---- decoding: all 256 patterns -------------------------------------------------------------

/// Runs body once per conversion path (the cpu backend at every Highway target of this CPU,
/// then the ref backend), with that path selected and its name traced.
template <class Body>
void on_every_path(Body body) {
  test::PathGuard guard;
  for (const test::ConvertPath& path : test::convert_paths()) {
    SCOPED_TRACE(path.label);
    guard.select(path);
    body(path.label);
  }
}

TEST(Fp8Decode, All256PatternsMatchTheReference) {
  for (DType t : kFp8) {
    const std::array<float, 256>& table = fp8_decode_table(t);
    std::vector<std::uint8_t> all(256);
    for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
    std::vector<std::vector<float>> bulk;
    std::vector<std::string> labels;
    on_every_path([&](const std::string& label) {
      bulk.emplace_back(256);
      labels.push_back(label);
      convert_fp8_to_f32(all.data(), t, bulk.back().data(), 256);
    });
    int nans = 0;
    for (int i = 0; i < 256; ++i) {
      const auto b = static_cast<std::uint8_t>(i);
      const std::string where = std::string(name(t)) + " pattern " + hex(b);
      const float v = decode(b, t);
      expect_same(v, ref_decode(b, t), where);
      EXPECT_EQ(bits_of(table[b]), bits_of(v)) << where;   // table == scalar, bit for bit
      for (std::size_t p = 0; p < bulk.size(); ++p) {      // bulk == scalar on every path
        EXPECT_EQ(bits_of(bulk[p][b]), bits_of(v)) << where << " " << labels[p];
      }
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(bits_of(v) & 0x00400000u) << where << ": NaN must come out quiet";
      }
    }
    // OCP: E4M3 has 2 NaN patterns (S.1111.111); E5M2 has 6 (S.11111.{01,10,11}).
    EXPECT_EQ(nans, t == DType::f8e4m3 ? 2 : 6) << name(t);
  }
  EXPECT_TRUE(std::isinf(e5m2_bits_to_f32(0x7c)) && e5m2_bits_to_f32(0xfc) < 0);
  EXPECT_EQ(e4m3_bits_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_bits_to_f32(0xfe), -448.0f);
  EXPECT_EQ(e4m3_bits_to_f32(0x38), 1.0f);
  EXPECT_EQ(e5m2_bits_to_f32(0x3c), 1.0f);
}

// ---- encoding: boundaries, midpoints, specials, sweeps --------------------------------------

/// Every value an fp8 rounding could get wrong: each finite value and its neighbours, each
/// midpoint between consecutive values (ties) and its neighbours, both signs; plus zeros,
/// f32 subnormals, half the smallest subnormal, values around and beyond max, Inf and NaNs.
std::vector<float> boundary_values(DType t) {
  std::vector<float> finite;
  for (int i = 0; i < 128; ++i) {
    const float v = decode(static_cast<std::uint8_t>(i), t);
    if (std::isfinite(v)) finite.push_back(v);
  }
  std::sort(finite.begin(), finite.end());
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> out;
  auto add_around = [&](float x) {
    out.push_back(x);
    out.push_back(std::nextafter(x, -inf));
    out.push_back(std::nextafter(x, inf));
  };
  for (std::size_t i = 0; i < finite.size(); ++i) {
    add_around(finite[i]);
    if (i + 1 < finite.size()) add_around((finite[i] + finite[i + 1]) / 2);  // exact in f32
  }
  // Beyond max: the tie with the next (non-finite) step, and far beyond.
  const auto max = static_cast<float>(traits(t).max);
  const float step = max - finite[finite.size() - 2];
  add_around(max + step / 2);
  add_around(max + step);
  for (float x : {1e5f, 1e30f, std::numeric_limits<float>::max(), inf}) add_around(x);
  // Tiny: half the smallest subnormal (a tie that goes to 0), f32 denormals and zero.
  const auto min_sub = static_cast<float>(traits(t).min_subnormal);
  add_around(min_sub / 2);
  add_around(min_sub * 1.5f);  // tie between 1 and 2 units: goes to 2 (even)
  add_around(0.0f);
  add_around(std::numeric_limits<float>::denorm_min());
  add_around(std::numeric_limits<float>::min());
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i) out.push_back(-out[i]);
  for (std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xffc00000u, 0xff800001u}) {
    out.push_back(std::bit_cast<float>(nan));
  }
  return out;
}

TEST(Fp8Encode, EveryBoundaryMidpointAndSpecialMatchesTheReference) {
  for (DType t : kFp8) {
    const std::vector<float> values = boundary_values(t);
    ASSERT_GT(values.size(), 1000u);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const float x = values[i];
      ASSERT_EQ(encode(x, t), ref_encode(x, t))
          << name(t) << " x=" << x << " (" << hex(bits_of(x)) << ")";
    }
    on_every_path([&](const std::string&) {
      std::vector<std::uint8_t> bulk(values.size());
      convert_f32_to_fp8(values.data(), bulk.data(), t, values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(bulk[i], ref_encode(values[i], t)) << name(t) << " bulk x=" << values[i];
      }
    });
  }
}

TEST(Fp8Encode, HandPickedValuesGuardTheReference) {
  // If the reference were wrong the sweeps would prove nothing; these follow from the OCP spec.
  EXPECT_EQ(f32_to_e4m3_bits(1.0f), 0x38);
  EXPECT_EQ(f32_to_e4m3_bits(448.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3_bits(464.0f), 0x7e);  // tie between 448 (even) and 480 (NaN slot)
  EXPECT_EQ(f32_to_e4m3_bits(std::nextafter(464.0f, 500.0f)), 0x7f);  // rounds past 448: NaN
  EXPECT_EQ(f32_to_e4m3_bits(-1000.0f), 0xff);
  EXPECT_EQ(f32_to_e4m3_bits(std::numeric_limits<float>::infinity()), 0x7f);  // no Inf: NaN
  EXPECT_EQ(f32_to_e4m3_bits(-std::numeric_limits<float>::infinity()), 0xff);
  EXPECT_EQ(f32_to_e4m3_bits(std::bit_cast<float>(0xffc00000u)), 0xff);  // NaN keeps its sign
  EXPECT_EQ(f32_to_e4m3_bits(0x1p-9f), 0x01);
  EXPECT_EQ(f32_to_e4m3_bits(0x1p-10f), 0x00);    // tie between 0 (even) and 2^-9
  EXPECT_EQ(f32_to_e4m3_bits(-0x1p-10f), 0x80);   // signed zero
  EXPECT_EQ(f32_to_e4m3_bits(0x1.8p-9f), 0x02);   // tie between 1 and 2 units: 2 (even)
  EXPECT_EQ(f32_to_e4m3_bits(0x1.ep-7f), 0x08);   // 7.5 units rounds up into the first normal
  EXPECT_EQ(f32_to_e4m3_bits(1.0625f), 0x38);     // 1 + 2^-4: tie, mantissa 000 is even
  EXPECT_EQ(f32_to_e4m3_bits(1.1875f), 0x3a);     // 1 + 3 * 2^-4: tie, rounds up to 010
  EXPECT_EQ(f32_to_e5m2_bits(1.0f), 0x3c);
  EXPECT_EQ(f32_to_e5m2_bits(57344.0f), 0x7b);
  EXPECT_EQ(f32_to_e5m2_bits(61440.0f), 0x7c);  // tie between 57344 and 2^16 (Inf): Inf (even)
  EXPECT_EQ(f32_to_e5m2_bits(std::nextafter(61440.0f, 0.0f)), 0x7b);
  EXPECT_EQ(f32_to_e5m2_bits(-std::numeric_limits<float>::infinity()), 0xfc);
  EXPECT_EQ(f32_to_e5m2_bits(std::numeric_limits<float>::quiet_NaN()), 0x7e);
  EXPECT_EQ(f32_to_e5m2_bits(0x1p-16f), 0x01);
  EXPECT_EQ(f32_to_e5m2_bits(0x1p-17f), 0x00);
  // The scalar types wrap the same conversions.
  EXPECT_EQ(float8_e4m3(3.0f).bits, 0x44);
  EXPECT_EQ(static_cast<float>(float8_e5m2::from_bits(0x40)), 2.0f);
}

TEST(Fp8Encode, SweepOfF32PatternsMatchesTheReference) {
  // Every fp8 rounding boundary is an f32 with its low 16 bits zero, so the top halves with
  // these low halves cover every boundary and both its neighbours; random patterns add the rest.
  std::vector<float> values;
  for (std::uint32_t hi = 0; hi < 0x10000u; ++hi) {
    for (std::uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      values.push_back(std::bit_cast<float>((hi << 16) | lo));
    }
  }
  std::mt19937 rng(20240611);
  for (int i = 0; i < (1 << 18); ++i) {
    values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  }
  for (DType t : kFp8) {
    std::vector<std::uint8_t> want(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) want[i] = ref_encode(values[i], t);
    on_every_path([&](const std::string&) {
      std::vector<std::uint8_t> bulk(values.size());  // > 64K elements: the parallel chunks run
      convert(values.data(), DType::f32, bulk.data(), t, values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(bulk[i], want[i]) << name(t) << " " << hex(bits_of(values[i]));
      }
    });
  }
}

// ---- conversions between fp8 and the 16-bit dtypes -----------------------------------------

TEST(Fp8Convert, From16BitIsExactWideningThenOneRounding) {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<std::uint16_t>(i);
  on_every_path([&](const std::string&) {
    for (DType src : {DType::bf16, DType::f16}) {
      for (DType t : kFp8) {
        std::vector<std::uint8_t> out(all.size());
        convert(all.data(), src, out.data(), t, all.size());
        for (std::uint32_t i = 0; i < 65536; ++i) {
          const auto b = static_cast<std::uint16_t>(i);
          const float wide = src == DType::bf16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
          ASSERT_EQ(out[i], ref_encode(wide, t)) << name(src) << "->" << name(t) << " " << hex(i);
        }
      }
    }
  });
}

TEST(Fp8Convert, To16BitAndF32IsExact) {
  std::vector<std::uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  on_every_path([&](const std::string&) {
    for (DType t : kFp8) {
      std::vector<float> f(256);
      convert(all.data(), t, f.data(), DType::f32, 256);
      std::vector<std::uint16_t> bf(256), hf(256);
      convert(all.data(), t, bf.data(), DType::bf16, 256);
      convert(all.data(), t, hf.data(), DType::f16, 256);
      for (int i = 0; i < 256; ++i) {
        const auto b = static_cast<std::uint8_t>(i);
        const double want = ref_decode(b, t);
        const std::string where = std::string(name(t)) + " " + hex(b);
        expect_same(f[b], want, where + " ->f32");
        expect_same(bf16_bits_to_f32(bf[b]), want, where + " ->bf16");
        expect_same(f16_bits_to_f32(hf[b]), want, where + " ->f16");
      }
    }
  });
}

TEST(Fp8Convert, BetweenTheTwoFormatsRoundsOnce) {
  std::vector<std::uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  on_every_path([&](const std::string&) {
    for (DType from : kFp8) {
      const DType to = from == DType::f8e4m3 ? DType::f8e5m2 : DType::f8e4m3;
      std::vector<std::uint8_t> out(256);
      convert(all.data(), from, out.data(), to, 256);
      for (int i = 0; i < 256; ++i) {
        const auto b = static_cast<std::uint8_t>(i);
        EXPECT_EQ(out[b], ref_encode(decode(b, from), to)) << name(from) << " " << hex(b);
      }
    }
  });
  // E5M2 values beyond E4M3's range become NaN; E4M3 448 is exactly 448 in E5M2.
  EXPECT_EQ(f32_to_e4m3_bits(e5m2_bits_to_f32(0x7b)), 0x7f);
  EXPECT_EQ(f32_to_e5m2_bits(e4m3_bits_to_f32(0x7e)), 0x5f);
}

TEST(Fp8Convert, RejectsBadArguments) {
  float f[4] = {};
  std::uint8_t b[4] = {};
  EXPECT_THROW(convert_f32_to_fp8(f, b, DType::bf16, 4), DTypeError);
  EXPECT_THROW(convert_fp8_to_f32(b, DType::f32, f, 4), DTypeError);
  EXPECT_THROW(fp8_decode_table(static_cast<DType>(9)), DTypeError);
  EXPECT_THROW(convert_f32_to_fp8(nullptr, b, DType::f8e4m3, 4), ValueError);
  EXPECT_THROW(convert(f, DType::f32, reinterpret_cast<std::uint8_t*>(f) + 1, DType::f8e4m3, 4),
               ValueError);  // overlap
  EXPECT_NO_THROW(convert_f32_to_fp8(nullptr, nullptr, DType::f8e4m3, 0));
}

// ---- tensors --------------------------------------------------------------------------------

TEST(Fp8Tensor, CreationCastsAndPrinting) {
  for (DType t : kFp8) {
    SCOPED_TRACE(name(t));
    const Tensor z = Tensor::zeros({2, 3}, t);
    EXPECT_EQ(z.dtype(), t);
    EXPECT_EQ(z.nbytes(), 6u);
    EXPECT_EQ(z.to_vector(), std::vector<float>(6, 0.0f));
    EXPECT_EQ(Tensor::empty({5}, t).nbytes(), 5u);
    // from_vector rounds once; 0.3 is not representable, 1000 overflows E4M3 only.
    const std::vector<float> src{1.0f, -2.5f, 0.3f, 1000.0f, -0.0f, 0x1p-9f};
    const Tensor x = Tensor::from_vector(src, {2, 3}, t);
    const std::vector<float> v = x.to_vector();
    for (std::size_t i = 0; i < src.size(); ++i) {
      expect_same(v[i], ref_decode(ref_encode(src[i], t), t), "element " + std::to_string(i));
    }
    EXPECT_TRUE(t == DType::f8e4m3 ? std::isnan(v[3]) : v[3] == 1024.0f);
    // Typed access checks the element type.
    if (t == DType::f8e4m3) {
      EXPECT_EQ(x.data<float8_e4m3>()[0].bits, 0x38);
      EXPECT_THROW(x.data<float8_e5m2>(), DTypeError);
    } else {
      EXPECT_EQ(x.data<float8_e5m2>()[0].bits, 0x3c);
    }
    EXPECT_THROW(x.data<float>(), DTypeError);
    EXPECT_FLOAT_EQ(Tensor::full({1}, 3.0f, t).item(), 3.0f);
    EXPECT_EQ(Tensor::ones({4}, t).to_vector(), std::vector<float>(4, 1.0f));
    // Casts both ways: fp8 -> wider is exact, back is the identity.
    for (DType wide : {DType::f32, DType::bf16, DType::f16}) {
      const Tensor w = x.to(wide);
      EXPECT_EQ(w.dtype(), wide);
      const std::vector<float> wv = w.to_vector();
      for (std::size_t i = 0; i < v.size(); ++i) expect_same(wv[i], v[i], name(wide));
      const Tensor back = w.to(t);
      EXPECT_EQ(std::memcmp(back.data_ptr(), x.data_ptr(), x.nbytes()), 0) << name(wide);
    }
    // A bf16 tensor cast to fp8: exact widening, then one rounding.
    const Tensor b = Tensor::from_vector({0.30078125f, 300.0f}, {2}, DType::bf16);
    const Tensor q = b.to(t);
    EXPECT_EQ(static_cast<const std::uint8_t*>(q.data_ptr())[0], ref_encode(0.30078125f, t));
    // describe_values (anomaly reports) prints fp8 tensors.
    EXPECT_NE(runtime::describe_values(x).find(name(t)), std::string::npos);
  }
}

TEST(Fp8Tensor, ViewsAndCopiesMoveBytes) {
  std::vector<float> src(12);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) - 5.5f;
  for (DType t : kFp8) {
    SCOPED_TRACE(name(t));
    const Tensor x = Tensor::from_vector(src, {3, 4}, t);
    const std::vector<float> v = x.to_vector();
    const Tensor xt = x.transpose(0, 1);  // a strided view
    EXPECT_FALSE(xt.is_contiguous());
    const std::vector<float> tv = xt.to_vector();  // contiguous() through the fp8 copy path
    for (std::int64_t i = 0; i < 4; ++i) {
      for (std::int64_t j = 0; j < 3; ++j) {
        EXPECT_EQ(tv[static_cast<std::size_t>(i * 3 + j)], v[static_cast<std::size_t>(j * 4 + i)]);
      }
    }
    EXPECT_EQ(xt.contiguous().dtype(), t);
    EXPECT_EQ(xt.clone().to_vector(), tv);
    EXPECT_EQ(xt.to(DType::f32).to_vector(), tv);  // strided fp8 -> f32 cast
    const Tensor s = x.slice(1, 1, 4, 2);          // columns 1 and 3
    EXPECT_EQ(s.to_vector(), (std::vector<float>{v[1], v[3], v[5], v[7], v[9], v[11]}));
    EXPECT_EQ(x.reshape({12}).to_vector(), v);
    EXPECT_EQ(xt.reshape({12}).to_vector(), tv);
    // A strided f32 source cast into fp8.
    const Tensor f = Tensor::from_vector(src, {3, 4}).transpose(0, 1).to(t);
    EXPECT_EQ(f.to_vector(), tv);
  }
}

// ---- safetensors ----------------------------------------------------------------------------

TEST(Fp8Safetensors, RoundTripKeepsDtypeAndEveryByte) {
  std::vector<std::uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (DType t : kFp8) {
    Tensor x = Tensor::empty({16, 16}, t);
    std::memcpy(x.data_ptr(), all.data(), 256);  // every pattern, NaNs included
    tensors.emplace_back(name(t), x);
    tensors.emplace_back(std::string(name(t)) + "_t", x.transpose(0, 1));  // written row-major
  }
  const std::string bytes = io::encode_safetensors(tensors);
  EXPECT_NE(bytes.find("\"F8_E4M3\""), std::string::npos);
  EXPECT_NE(bytes.find("\"F8_E5M2\""), std::string::npos);
  io::test::TempDir dir;
  const std::string path = dir / "fp8.safetensors";
  io::save_safetensors(path, tensors);
  for (const io::SafetensorsFile& file : {io::decode_safetensors(bytes, "memory"),
                                           io::load_safetensors(path)}) {
    for (DType t : kFp8) {
      const Tensor& x = io::find_tensor(file, name(t), "fp8 test");
      EXPECT_EQ(x.dtype(), t);
      EXPECT_EQ(x.shape(), (Shape{16, 16}));
      EXPECT_EQ(std::memcmp(x.data_ptr(), all.data(), 256), 0) << name(t);
      const Tensor& xt = io::find_tensor(file, std::string(name(t)) + "_t", "fp8 test");
      const auto* b = static_cast<const std::uint8_t*>(xt.data_ptr());
      for (int i = 0; i < 16; ++i) {
        for (int j = 0; j < 16; ++j) {
          ASSERT_EQ(b[i * 16 + j], all[static_cast<std::size_t>(j * 16 + i)]);
        }
      }
    }
  }
}

// ---- autograd: straight-through casts -------------------------------------------------------

TEST(Fp8Autograd, CastIsStraightThroughWithF32Gradients) {
  for (DType t : kFp8) {
    SCOPED_TRACE(name(t));
    Tensor x = Tensor::from_vector({0.3f, -1.7f, 5.1f, 1e6f}, {4});
    x.set_requires_grad();
    const Tensor c = Tensor::from_vector({1.5f, -2.0f, 0.25f, 3.0f}, {4});
    const Tensor q = x.to(t);
    EXPECT_TRUE(q.requires_grad());
    sum(mul(q.to(DType::f32), c)).backward();
    // d/dx of the cast is taken as 1 (even where 1e6 overflowed): the gradient is c, in f32.
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().dtype(), DType::f32);
    EXPECT_EQ(x.grad().to_vector(), c.to_vector());
  }
}

TEST(Fp8Autograd, GradientsThroughFp8ViewsStayF32) {
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  x.set_requires_grad();
  const Tensor q = x.to(DType::f8e5m2);
  const Tensor picked = q.transpose(0, 1).slice(0, 1, 3).reshape({4});  // x[:, 1:3]
  sum(picked.to(DType::f32)).backward();
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{0, 1, 1, 0, 1, 1}));
  // Backward from an fp8 root: the implicit seed is 1, and x receives it in f32.
  Tensor y = Tensor::from_vector({2.0f}, {1});
  y.set_requires_grad();
  y.to(DType::f8e4m3).backward();
  EXPECT_EQ(y.grad().to_vector(), std::vector<float>{1.0f});
}

TEST(Fp8Autograd, Fp8LeavesCannotRequireGrad) {
  for (DType t : kFp8) {
    Tensor q = Tensor::zeros({3}, t);
    try {
      q.set_requires_grad();
      FAIL() << "expected DTypeError";
    } catch (const DTypeError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot require grad"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(q.set_requires_grad(false));
    // Nor can an fp8 tensor become the gradient of an f32 leaf (optimizers would read it).
    const Tensor leaf = Tensor::zeros({3});
    EXPECT_THROW(leaf.set_grad(q), DTypeError);
    EXPECT_NO_THROW(leaf.set_grad(q.to(DType::f32)));
    // Layers built in fp8 hit the same check instead of training fp8 weights.
    EXPECT_THROW(nn::Linear(4, 2, true, 1, t), DTypeError);
  }
}

TEST(Fp8Autograd, AnomalyModeWidensFp8OutputsToCheckThem) {
  runtime::DetectAnomaly on;
  Tensor x = Tensor::from_vector({1.0f, 2.0f}, {2});
  x.set_requires_grad();
  EXPECT_NO_THROW(x.to(DType::f8e4m3));  // finite: the forward check passes
  Tensor big = Tensor::from_vector({1.0f, 1000.0f}, {2});
  big.set_requires_grad();
  EXPECT_THROW(big.to(DType::f8e4m3), runtime::AnomalyError);  // 1000 overflows E4M3 to NaN
}

// ---- every computing op refuses fp8 ---------------------------------------------------------

using In = const Tensor&;  // q: an fp8 tensor [2, 2, 4, 4]; f: an f32 tensor of that shape

struct OpCase {
  const char* name;
  std::function<Tensor(In q, In f)> run;
};

std::vector<OpCase> computing_ops() {
  static Tensor rm = Tensor::zeros({2}), rv = Tensor::ones({2});
  return {
      {"add", [](In q, In f) { return add(q, f); }},
      {"add_fp8_fp8", [](In q, In) { return add(q, q); }},
      {"sub", [](In q, In f) { return sub(f, q); }},
      {"mul", [](In q, In f) { return mul(q, f); }},
      {"div", [](In q, In f) { return div(q, f); }},
      {"maximum", [](In q, In f) { return maximum(q, f); }},
      {"minimum", [](In q, In f) { return minimum(q, f); }},
      {"neg", [](In q, In) { return neg(q); }},
      {"abs", [](In q, In) { return abs(q); }},
      {"exp", [](In q, In) { return exp(q); }},
      {"log", [](In q, In) { return log(q); }},
      {"sqrt", [](In q, In) { return sqrt(q); }},
      {"rsqrt", [](In q, In) { return rsqrt(q); }},
      {"reciprocal", [](In q, In) { return reciprocal(q); }},
      {"square", [](In q, In) { return square(q); }},
      {"relu", [](In q, In) { return relu(q); }},
      {"gelu", [](In q, In) { return gelu(q); }},
      {"tanh", [](In q, In) { return tanh(q); }},
      {"sigmoid", [](In q, In) { return sigmoid(q); }},
      {"pow", [](In q, In) { return pow(q, 2.0f); }},
      {"affine", [](In q, In) { return affine(q, 2.0f, 1.0f); }},
      {"sum", [](In q, In) { return sum(q); }},
      {"sum_dim", [](In q, In) { return sum(q, 1); }},
      {"mean", [](In q, In) { return mean(q); }},
      {"mean_dim", [](In q, In) { return mean(q, -1); }},
      {"amax", [](In q, In) { return amax(q, 0); }},
      {"max_abs", [](In q, In) { return max_abs(q); }},
      {"norm", [](In q, In) { return norm(q); }},
      {"cumsum", [](In q, In) { return cumsum(q); }},
      {"softmax", [](In q, In) { return softmax(q); }},
      {"log_softmax", [](In q, In) { return log_softmax(q); }},
      {"cross_entropy",
       [](In q, In) { return cross_entropy(q.reshape({16, 4}), std::vector<std::int64_t>(16)); }},
      {"mse_loss", [](In q, In f) { return mse_loss(q, f); }},
      {"mse_loss_target", [](In q, In f) { return mse_loss(f, q); }},
      {"dropout", [](In q, In) { return dropout(q, 0.5f, true, 1); }},
      {"cat", [](In q, In) { return cat({q, q}, 0); }},
      {"stack", [](In q, In) { return stack({q, q}, 0); }},
      {"where", [](In q, In f) { return where(f, q, f); }},
      {"addmm",
       [](In q, In) {
         const Tensor m = q.reshape({16, 4});
         return addmm(Tensor::zeros({16, 16}), m, m.transpose(0, 1));
       }},
      {"conv2d", [](In q, In) { return conv2d(q, Tensor::zeros({2, 2, 3, 3}, q.dtype())); }},
      {"conv2d_weight", [](In q, In f) { return conv2d(f, q.slice(2, 0, 3).slice(3, 0, 3)); }},
      {"max_pool2d", [](In q, In) { return max_pool2d(q, 2); }},
      {"avg_pool2d", [](In q, In) { return avg_pool2d(q, 2); }},
      {"global_avg_pool2d", [](In q, In) { return global_avg_pool2d(q); }},
      {"batch_norm", [](In q, In) { return batch_norm(q, rm, rv, Tensor(), Tensor(), true); }},
      {"layer_norm", [](In q, In) { return layer_norm(q, 1, Tensor(), Tensor()); }},
      {"layer_norm_weight",
       [](In q, In f) {
         const Tensor w = q.slice(0, 0, 1).slice(1, 0, 1).slice(2, 0, 1).reshape({4});
         return layer_norm(f, 1, w, Tensor());
       }},
      {"matmul_mixed", [](In q, In f) { return matmul(q.reshape({16, 4}), f.reshape({4, 16})); }},
      {"linear_mixed", [](In q, In f) { return linear(f.reshape({16, 4}), q.reshape({16, 4})); }},
  };
}

TEST(Fp8Ops, EveryComputingOpThrowsDTypeErrorNamingTheFix) {
  std::vector<float> values(64);
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = 0.25f * static_cast<float>(i % 7) + 0.5f;
  }
  const Tensor f = Tensor::from_vector(values, {2, 2, 4, 4});
  for (DType t : kFp8) {
    const Tensor q = f.to(t);
    for (bool region : {false, true}) {
      // Inside an autocast region too: the region must not silently widen fp8 inputs.
      runtime::Autocast autocast(region, DType::bf16);
      for (const OpCase& c : computing_ops()) {
        SCOPED_TRACE(std::string(c.name) + " " + name(t) + (region ? " (autocast bf16)" : ""));
        try {
          c.run(q, f);
          ADD_FAILURE() << "expected DTypeError";
        } catch (const DTypeError& e) {
          const std::string what = e.what();
          EXPECT_TRUE(what.find("storage dtype") != std::string::npos ||
                      what.find("needs both operands in fp8") != std::string::npos)
              << what;
          EXPECT_NE(what.find(name(t)), std::string::npos) << what;
        }
      }
    }
  }
}

TEST(Fp8Ops, KernelsRefuseFp8BeforeAnyParallelRegion) {
  // Below the op frontends: the raw kernels, large enough to run on several threads, throw
  // DTypeError on the calling thread (an exception escaping an OpenMP region would abort).
  const std::int64_t n = 1 << 17;
  std::vector<std::uint8_t> q(static_cast<std::size_t>(n), 0x38);  // E4M3 ones
  std::vector<float> f(static_cast<std::size_t>(n), 1.0f), out(static_cast<std::size_t>(n));
  const DType e4 = DType::f8e4m3;
  float sum_out = 0;
  EXPECT_THROW(kernels::reduce(kernels::ReduceOp::sum, q.data(), e4, 1, n, 1, &sum_out, DType::f32),
               DTypeError);
  EXPECT_THROW(kernels::reduce(kernels::ReduceOp::amax, f.data(), DType::f32, 1, n, 1, q.data(), e4),
               DTypeError);
  EXPECT_THROW(kernels::fill(q.data(), e4, n, 1.0f), DTypeError);
  const std::vector<std::int64_t> shape{4, n / 4}, contiguous{n / 4, 1}, scalar_row{1, 0};
  EXPECT_THROW(kernels::binary(kernels::BinaryOp::add, shape, {f.data(), DType::f32, contiguous},
                               {q.data(), e4, scalar_row}, out.data(), DType::f32),
               DTypeError);  // an fp8 scalar per row next to an f32 vector
  EXPECT_THROW(kernels::unary(kernels::UnaryOp::relu, shape, {q.data(), e4, contiguous}, q.data(), e4),
               DTypeError);
  std::vector<float> mean(256), rstd(256);
  EXPECT_THROW(kernels::layer_norm_forward(q.data(), e4, 256, n / 256, nullptr, nullptr, 1e-5f,
                                           q.data(), e4, mean.data(), rstd.data()),
               DTypeError);
  kernels::Pool2dDesc pool;
  pool.n = 1, pool.c = 64, pool.h = 64, pool.w = 32, pool.kernel = 2, pool.stride = 2, pool.dtype = e4;
  EXPECT_THROW(kernels::avg_pool2d(pool, q.data(), out.data()), DTypeError);
  EXPECT_THROW(kernels::global_avg_pool2d(q.data(), e4, 64, n / 64, out.data()), DTypeError);
  // A dataset stored in fp8 is refused by the finiteness check instead of misread.
  data::Dataset d;
  d.images = Tensor::ones({64, 16}, e4);
  d.labels.assign(64, 0);
  EXPECT_THROW(data::check_finite(d, "fp8 images"), DTypeError);
}

TEST(Fp8Ops, PrecisionPoliciesAndAutocastDoNotTakeFp8) {
  EXPECT_THROW(amp::PrecisionPolicy::parse("p=f8e4m3,c=bf16,o=f32"), ValueError);
  EXPECT_THROW(amp::PrecisionPolicy::parse("p=f32,c=e5m2,o=f32"), ValueError);
  EXPECT_THROW(runtime::Autocast(true, DType::f8e4m3), DTypeError);
  nn::Linear layer(4, 2, true, 1);
  amp::PrecisionPolicy policy;
  policy.dtypes.param = DType::f8e5m2;
  EXPECT_THROW(amp::apply_parameter_dtypes(layer, policy), DTypeError);
  EXPECT_EQ(layer.parameters().front().dtype(), DType::f32);  // refused before any change
}

}  // namespace
}  // namespace mixprec
