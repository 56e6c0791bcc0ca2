// When the cuda backend's memory-bound kernels take the 16-byte path: host logic
// (src/kernels/cuda/vector_path.h), checked on every machine, GPU or not, in every build. That
// both paths compute the same bits is the device conformance harness's job on a GPU (the
// elementwise, convert and copy cases, aligned and not).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/vector_path.h"

namespace mixprec::kernels::cuda {
namespace {

/// 64 bytes starting on a 16-byte boundary: at(k) is k bytes past it.
struct Aligned {
  alignas(16) std::uint8_t bytes[64] = {};
  const void* at(int k) const { return bytes + k; }
  void* at(int k) { return bytes + k; }
};

TEST(CudaVectorPath, ContiguousAlignedOperandsOfWidenedDtypesTakePacks) {
  Aligned a, b, out;
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    EXPECT_EQ(elementwise_path(true, {{a.at(0), t}, {out.at(0), t}}), ElementwisePath::packs)
        << name(t);
    // Mixed dtypes: each operand only needs its own alignment.
    EXPECT_EQ(elementwise_path(true, {{a.at(16), t}, {b.at(32), DType::f32},
                                      {out.at(0), DType::bf16}}),
              ElementwisePath::packs)
        << name(t);
  }
  EXPECT_EQ(elementwise_path(true, {{out.at(0), DType::bf16}}), ElementwisePath::packs);  // fill
}

TEST(CudaVectorPath, AnyMisalignedOperandFallsBackToOneElementPerStep) {
  Aligned a, b, out;
  // One element past the boundary in each dtype, and 8 bytes (half a vector) past it.
  for (int offset : {2, 4, 8, 12}) {
    EXPECT_EQ(elementwise_path(true, {{a.at(offset), DType::bf16}, {out.at(0), DType::bf16}}),
              ElementwisePath::contiguous)
        << "input " << offset;
    EXPECT_EQ(elementwise_path(true, {{a.at(0), DType::f32}, {out.at(offset), DType::f32}}),
              ElementwisePath::contiguous)
        << "output " << offset;
    EXPECT_EQ(elementwise_path(true, {{a.at(0), DType::f16}, {b.at(offset), DType::f16},
                                      {out.at(0), DType::f16}}),
              ElementwisePath::contiguous)
        << "second input " << offset;
  }
}

TEST(CudaVectorPath, DtypesTheWideningLoadsDoNotReadNeverTakePacks) {
  Aligned a, out;
  for (DType t : {DType::f8e4m3, DType::f8e5m2}) {
    EXPECT_EQ(elementwise_path(true, {{a.at(0), t}, {out.at(0), DType::f32}}),
              ElementwisePath::contiguous)
        << name(t);
  }
}

TEST(CudaVectorPath, StridedCallsStayStridedWhateverTheirAlignment) {
  Aligned a, out;
  EXPECT_EQ(elementwise_path(false, {{a.at(0), DType::bf16}, {out.at(0), DType::bf16}}),
            ElementwisePath::strided);
  EXPECT_EQ(elementwise_path(false, {{a.at(2), DType::bf16}}), ElementwisePath::strided);
  EXPECT_EQ(typed_path(false, {a.at(0), out.at(0)}), ElementwisePath::strided);
}

TEST(CudaVectorPath, TypedKernelsTakePacksForAnyDtypeWhenAligned) {
  Aligned a, out;
  EXPECT_EQ(typed_path(true, {a.at(0), out.at(16)}), ElementwisePath::packs);
  EXPECT_EQ(typed_path(true, {a.at(1), out.at(0)}), ElementwisePath::contiguous);  // fp8 + 1
  EXPECT_EQ(typed_path(true, {a.at(0), out.at(8)}), ElementwisePath::contiguous);
}

TEST(CudaVectorPath, NullOperandsCountAsAligned) {
  Aligned a;
  EXPECT_TRUE(aligned16(nullptr));
  EXPECT_TRUE(aligned16(a.at(48)));
  EXPECT_FALSE(aligned16(a.at(47)));
}

TEST(CudaVectorPath, RowMajorContiguity) {
  using V = std::vector<std::int64_t>;
  const auto contiguous = [](V shape, V strides) { return row_major_contiguous(shape, strides); };
  EXPECT_TRUE(contiguous({2, 3, 4}, {12, 4, 1}));
  EXPECT_TRUE(contiguous({70001}, {1}));
  EXPECT_TRUE(contiguous({}, {}));                // one element
  EXPECT_TRUE(contiguous({2, 1, 4}, {4, 99, 1}));  // a dimension of 1 may have any stride
  EXPECT_TRUE(contiguous({1, 1}, {0, 0}));
  EXPECT_TRUE(contiguous({3, 0, 5}, {7, 7, 7}));  // no elements
  EXPECT_FALSE(contiguous({37, 129}, {1, 37}));   // transposed
  EXPECT_FALSE(contiguous({37, 129}, {0, 1}));    // broadcast rows
  EXPECT_FALSE(contiguous({37, 129}, {1, 0}));    // broadcast columns
  EXPECT_FALSE(contiguous({4, 8}, {16, 1}));      // rows with a gap between them
  EXPECT_FALSE(contiguous({8}, {2}));             // every other element
  EXPECT_FALSE(contiguous({8}, {-1}));
  EXPECT_FALSE(contiguous({2, 3}, {3}));          // a stride missing
}

}  // namespace
}  // namespace mixprec::kernels::cuda
