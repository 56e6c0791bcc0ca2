// The cpu strided copy against the reference, bit for bit: its layout changes (NCHW <->
// channels-last, transposes) run in tiles, its slices run by contiguous runs, and the rest is the
// reference itself; every dtype pair, with NaNs (signalling ones included), infinities, -0 and
// values that round, on shapes that leave partial tiles, merge dimensions and broadcast.
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/copy.h"

namespace mixprec::ktest {
namespace {

using Dims = std::vector<std::int64_t>;

/// Row-major strides of shape.
Dims row_major(const Dims& shape) {
  Dims s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

/// Strides that store `shape` with its dimensions laid out in the order `layout` (outermost
/// first), e.g. {0, 2, 3, 1} over [N, C, H, W] is channels-last.
Dims laid_out(const Dims& shape, const Dims& layout) {
  Dims s(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = layout.size(); i-- > 0;) {
    s[static_cast<std::size_t>(layout[i])] = step;
    step *= shape[static_cast<std::size_t>(layout[i])];
  }
  return s;
}

/// Elements spanned by a strided view (the largest offset + 1; strides are non-negative here).
std::int64_t extent(const Dims& shape, const Dims& strides) {
  std::int64_t last = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
  return last + 1;
}

/// Random values in [-4, 4) with every few elements a special one (by its bits).
Buffer input(DType t, std::int64_t n, std::uint32_t seed) {
  Buffer b = random_buffer(t, n, -4.0f, 4.0f, seed);
  const std::uint32_t specials16[] = {0x7fc1u, 0x7f81u, 0xffc0u, 0x8000u, 0x7f80u};  // bf16
  const std::uint32_t specialsf16[] = {0x7e01u, 0x7c01u, 0xfe00u, 0x8000u, 0x7c00u};
  const std::uint32_t specials32[] = {0x7fc00001u, 0x7f800001u, 0xffc00000u, 0x80000000u, 0x7f800000u};
  const std::uint32_t* sp = t == DType::bf16 ? specials16 : t == DType::f16 ? specialsf16 : specials32;
  for (std::int64_t i = 3; i < n; i += 7) {
    std::memcpy(static_cast<char*>(b.data()) + i * static_cast<std::int64_t>(size_of(t)),
                &sp[(i / 7) % 5], size_of(t));
  }
  return b;
}

struct CopyCase {
  std::string what;
  Dims shape, in_strides, out_strides;
};

std::vector<CopyCase> cases() {
  std::vector<CopyCase> c;
  // Layout changes at the CNN's shapes and at shapes leaving partial 32 x 32 tiles.
  for (const Dims& s : {Dims{128, 64, 7, 7}, Dims{3, 33, 5, 9}, Dims{2, 3, 1, 31}, Dims{1, 70, 2, 1}}) {
    const Dims nchw = row_major(s), nhwc = laid_out(s, {0, 2, 3, 1});
    c.push_back({"channels-last to NCHW", s, nhwc, nchw});
    c.push_back({"NCHW to channels-last", s, nchw, nhwc});
  }
  // Transposes of 2-D and 3-D arrays, and a permutation of 5 dimensions.
  c.push_back({"transpose 2-D", {37, 129}, {1, 37}, {129, 1}});
  c.push_back({"transpose last two of 3-D", {4, 65, 33}, {65 * 33, 1, 65}, row_major({4, 65, 33})});
  const Dims five{2, 3, 4, 5, 6};
  c.push_back({"permuted 5-D", five, laid_out(five, {3, 0, 4, 1, 2}), row_major(five)});
  c.push_back({"into a permuted 5-D", five, row_major(five), laid_out(five, {4, 2, 0, 3, 1})});
  // Runs contiguous on both sides: a column slice of a wider array into a packed one and back.
  c.push_back({"slice of columns", {50, 30}, {70, 1}, {30, 1}});
  c.push_back({"into a slice of columns", {50, 30}, {30, 1}, {70, 1}});
  // A broadcast input (stride 0) laid out transposed; a strided slice (no unit stride in).
  c.push_back({"broadcast, transposed", {40, 33}, {0, 1}, {1, 40}});
  c.push_back({"every other element", {9, 20}, {80, 2}, {20, 1}});
  return c;
}

TEST(StridedCopy, CpuEqualsTheReferenceBitForBit) {
  std::uint32_t seed = 900;
  for (const CopyCase& k : cases()) {
    for (DType from : kAllDTypes) {
      for (DType to : kAllDTypes) {
        SCOPED_TRACE(k.what + " " + name(from) + " -> " + name(to));
        const Buffer x = input(from, extent(k.shape, k.in_strides), ++seed);
        const std::int64_t n_out = extent(k.shape, k.out_strides);
        Buffer got(to, n_out), want(to, n_out);
        // Gaps in a strided output keep their bits: start both from the same pattern.
        std::memset(got.data(), 0x5a, static_cast<std::size_t>(n_out) * size_of(to));
        std::memset(want.data(), 0x5a, static_cast<std::size_t>(n_out) * size_of(to));
        kernels::cpu::copy(k.shape, {x.data(), from, k.in_strides}, {got.data(), to, k.out_strides});
        kernels::ref::copy(k.shape, {x.data(), from, k.in_strides}, {want.data(), to, k.out_strides});
        expect_bitwise(got, want, "copy");
      }
    }
  }
}

// fp8 bytes transposed into the same fp8 dtype run the same tiles, moving the bytes eight by
// eight in words (and the edges one by one): every byte pattern, NaNs included, lands as the
// reference puts it.
TEST(StridedCopy, Fp8TransposesMoveTheBytesAsTheReference) {
  for (DType t : {DType::f8e4m3, DType::f8e5m2}) {
    for (const CopyCase& k : cases()) {
      SCOPED_TRACE(k.what + " " + name(t));
      const std::int64_t n_in = extent(k.shape, k.in_strides), n_out = extent(k.shape, k.out_strides);
      std::vector<std::uint8_t> x(static_cast<std::size_t>(n_in));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::uint8_t>(i * 37 + 11);
      std::vector<std::uint8_t> got(static_cast<std::size_t>(n_out), 0x5a), want(got);
      kernels::cpu::copy(k.shape, {x.data(), t, k.in_strides}, {got.data(), t, k.out_strides});
      kernels::ref::copy(k.shape, {x.data(), t, k.in_strides}, {want.data(), t, k.out_strides});
      EXPECT_EQ(got, want);
    }
  }
}

// The layout change really is a transpose (not only the same as the reference): element
// (n, c, h, w) of a channels-last array lands at its NCHW place.
TEST(StridedCopy, ChannelsLastToNchwPutsEachElementInItsPlace) {
  const Dims s{2, 35, 3, 4};
  const std::int64_t n = std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
  Buffer x(DType::f32, n), y(DType::f32, n);
  const Dims nhwc = laid_out(s, {0, 2, 3, 1});
  for (std::int64_t i = 0; i < n; ++i) x.set(i, static_cast<float>(i));
  kernels::cpu::copy(s, {x.data(), DType::f32, nhwc}, {y.data(), DType::f32, row_major(s)});
  for (std::int64_t b = 0; b < s[0]; ++b)
    for (std::int64_t c = 0; c < s[1]; ++c)
      for (std::int64_t h = 0; h < s[2]; ++h)
        for (std::int64_t w = 0; w < s[3]; ++w) {
          const std::int64_t at_nchw = ((b * s[1] + c) * s[2] + h) * s[3] + w;
          const std::int64_t at_nhwc = b * nhwc[0] + c * nhwc[1] + h * nhwc[2] + w * nhwc[3];
          ASSERT_EQ(y.get(at_nchw), static_cast<float>(at_nhwc)) << b << "," << c << "," << h << "," << w;
        }
}

}  // namespace
}  // namespace mixprec::ktest
