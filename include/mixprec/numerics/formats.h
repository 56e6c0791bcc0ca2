#pragma once
/// Floating-point formats used in mixed-precision training (FP32, TF32, FP16, BF16, FP8 E4M3 and
/// E5M2), an exact scalar round-to-nearest-even quantiser for each, and two experiments built on
/// it: the representation error across magnitudes and the error of low-precision accumulation.
/// Everything here is a scalar, double-precision reference for exploration, not a fast kernel.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace mixprec::numerics {

/// The formats described here, narrowest exponent last.
enum class Format : std::uint8_t { fp32, tf32, fp16, bf16, fp8_e4m3, fp8_e5m2 };

/// The properties of one binary floating-point format (1 sign bit, exponent_bits, mantissa_bits).
struct FormatInfo {
  Format format;
  const char* name;  ///< "fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"
  int bits;          ///< total bits, sign included (tf32: 1+8+10 = 19, kept in 32 in memory)
  int exponent_bits;
  int mantissa_bits;     ///< stored (explicit) mantissa bits
  int bias;              ///< exponent bias: the value is 2^(field - bias) * 1.mantissa
  bool has_inf;          ///< IEEE-like: the all-ones exponent holds Inf and NaN. false (OCP
                         ///< E4M3): only S.1111.111 is NaN, there is no Inf, overflow gives NaN
  double max;            ///< largest finite value
  double min_normal;     ///< smallest positive normal value, 2^(1 - bias)
  double min_subnormal;  ///< smallest positive subnormal value, 2^(1 - bias - mantissa_bits)
  double epsilon;  ///< 2^-mantissa_bits: gap from 1 to the next value (twice the unit roundoff)
  double decimal_digits;  ///< (mantissa_bits + 1) * log10(2): significant decimal digits
};

/// Unit roundoff u = epsilon / 2 of a format (the largest relative error of one rounding).
inline double unit_roundoff(const FormatInfo& f) { return f.epsilon / 2; }

/// The table of all formats, in the order of the Format enum.
const std::array<FormatInfo, 6>& all_formats();
/// The row of one format.
const FormatInfo& format_info(Format format);
/// Parses a format name ("fp32", "tf32", "fp16"/"f16", "bf16", "fp8_e4m3"/"e4m3",
/// "fp8_e5m2"/"e5m2"); ValueError listing the names otherwise.
const FormatInfo& parse_format(std::string_view name);

/// Rounds x to the nearest value of the format, ties to even, exactly (no double rounding).
/// Subnormals are kept (gradual underflow); what rounds below half the smallest subnormal becomes
/// a signed zero. Overflow (a result beyond max after rounding) gives +-Inf for formats with Inf
/// and NaN for FP8 E4M3, as OCP's non-saturating conversion mode specifies; NaN stays NaN.
/// For fp32, fp16 and bf16 this equals float(x), float16(float(x)) and bfloat16(float(x)) whenever
/// x is a float (converting a double to float first could round twice).
double quantize(double x, const FormatInfo& format);

/// The bit pattern of quantize(x, format), in the low `bits` bits (sign at bit bits-1). NaN is
/// encoded as the canonical quiet NaN with x's sign (E4M3: S.1111.111; others: exponent all ones,
/// top mantissa bit set). A tf32 pattern is the top 19 bits of the fp32 pattern of its value.
std::uint32_t encode_bits(double x, const FormatInfo& format);
/// The exact value of a bit pattern of the format (only the low `bits` bits are read).
double decode_bits(std::uint32_t bits, const FormatInfo& format);

/// FP8 E4M3 (OCP 8-bit floating point, "fn": bias 7, no Inf, NaN = S.1111.111, max 448).
std::uint8_t encode_e4m3(double x);
/// The value of an FP8 E4M3 bit pattern.
double decode_e4m3(std::uint8_t bits);
/// FP8 E5M2 (OCP: IEEE-like, bias 15, Inf and NaN, max 57344).
std::uint8_t encode_e5m2(double x);
/// The value of an FP8 E5M2 bit pattern.
double decode_e5m2(std::uint8_t bits);

/// Representation error of a format over one decade of magnitudes [10^exponent, 10^(exponent+1)).
struct DecadeError {
  int exponent = 0;               ///< decimal exponent of the decade's lower end
  int samples = 0;                ///< positive samples taken in the decade
  double max_rel_error = 0;       ///< over samples that did not overflow (a flush counts as 1);
                                  ///< +Inf when all of them overflowed
  double mean_rel_error = 0;      ///< same samples as max_rel_error
  double overflow_fraction = 0;   ///< fraction quantised to Inf or NaN
  double subnormal_fraction = 0;  ///< fraction quantised to a non-zero subnormal
  double zero_fraction = 0;       ///< fraction quantised (flushed) to zero
};

/// Quantises samples_per_decade log-uniformly spaced positive values 10^(e + (i + 0.5) / n) in each
/// decade e = lo_exp .. hi_exp - 1 (deterministic) and reports the relative error per decade.
/// ValueError unless lo_exp < hi_exp, both within -300..300, and samples_per_decade >= 1.
std::vector<DecadeError> representation_error_sweep(const FormatInfo& format, int lo_exp = -12,
                                                    int hi_exp = 12, int samples_per_decade = 1000);

/// The result of one dot product accumulated in a low-precision accumulator.
struct AccumulationResult {
  int n = 0;             ///< number of products summed
  Format input{};        ///< format the inputs were quantised to
  Format accumulator{};  ///< format the running sum was rounded to after each add
  double exact = 0;      ///< the dot product of the quantised inputs, in (compensated) double
  double computed = 0;   ///< the accumulated result
  double rel_error = 0;  ///< |computed - exact| / |exact|
  double gamma_n = 0;    ///< n u / (1 - n u), u the accumulator's unit roundoff; +Inf if n u >= 1
  bool gamma_defined = false;  ///< false when n u >= 1 (the bound then says nothing)
};

/// Dot product of n pairs a_i, b_i drawn uniform in [0, 1) from Philox stream `seed` (pair i is
/// a pure function of seed and i, so every n and accumulator sees the same prefix), each input
/// quantised to `input`; every step computes s = quantize(s + a_i b_i, accumulator) (one rounding
/// per step, like an FMA in the accumulator format). Since all products are >= 0, the error is
/// bounded by gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability, 3.1). ValueError if n < 1.
AccumulationResult accumulation_experiment(int n, const FormatInfo& input,
                                           const FormatInfo& accumulator, std::uint64_t seed);

/// Sizes lo, ..., hi in a geometric series with per_decade steps per decade (rounded to integers,
/// duplicates removed, hi included). ValueError unless 1 <= lo <= hi and per_decade >= 1.
std::vector<int> geometric_sizes(int lo, int hi, int per_decade);

}  // namespace mixprec::numerics
