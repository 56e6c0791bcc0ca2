// Dataset checks: check_finite finds the first NaN/Inf (sample and feature) in f32 and 16-bit
// data, on small sets and on sets large enough for the chunked, threaded reduction;
// check_labels finds the first label out of range; subset copies the right rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "data/expect_error.h"
#include "mixprec/core/error.h"
#include "mixprec/data/dataset.h"

namespace mixprec::data {
namespace {

using testing::expect_value_error;

// n samples of f features, value i*f+j -> (i * f + j) * 0.001 (all finite), labels i % 10.
Dataset make(std::int64_t n, std::int64_t f, DType dtype = DType::f32) {
  std::vector<float> v(static_cast<std::size_t>(n * f));
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k) * 0.001f;
  Dataset d;
  d.images = Tensor::from_vector(v, {n, f}, dtype);
  for (std::int64_t i = 0; i < n; ++i) d.labels.push_back(i % 10);
  return d;
}

void set(Dataset& d, std::int64_t sample, std::int64_t feature, float value) {
  d.images.data<float>()[sample * d.images.size(1) + feature] = value;
}

TEST(DataCheckFinite, AcceptsFiniteDataIncludingExtremes) {
  Dataset d = make(20, 7);
  set(d, 3, 1, std::numeric_limits<float>::max());
  set(d, 4, 2, -std::numeric_limits<float>::max());
  set(d, 5, 0, std::numeric_limits<float>::denorm_min());
  EXPECT_NO_THROW(check_finite(d, "train data"));
  Dataset empty;
  empty.images = Tensor::empty({0, 5});
  EXPECT_NO_THROW(check_finite(empty, "nothing"));
}

TEST(DataCheckFinite, NamesFirstNaNSampleAndFeature) {
  Dataset d = make(30, 5);
  set(d, 17, 3, std::nanf(""));
  set(d, 20, 0, std::nanf(""));  // a later one: the message names the first
  expect_value_error([&] { check_finite(d, "train data 'x.csv'"); },
                     {"check_finite", "train data 'x.csv'", "sample 17 feature 3 is NaN", "clean the data"});
}

TEST(DataCheckFinite, NamesInfWithItsSign) {
  Dataset d = make(30, 5);
  set(d, 9, 4, -std::numeric_limits<float>::infinity());
  set(d, 12, 0, std::numeric_limits<float>::infinity());
  expect_value_error([&] { check_finite(d, "test data"); }, {"test data", "sample 9 feature 4 is -Inf"});
  set(d, 9, 4, 1.0f);
  expect_value_error([&] { check_finite(d, "test data"); }, {"sample 12 feature 0 is +Inf"});
}

TEST(DataCheckFinite, FindsTheFirstBadValueInALargeSet) {
  // 1000 x 784 = 784000 elements: several 64K chunks reduced in parallel; the bad value sits in
  // a late chunk, after an earlier one holding an Inf in a different sample.
  Dataset d = make(1000, 784);
  set(d, 999, 783, std::nanf(""));
  set(d, 700, 5, std::numeric_limits<float>::infinity());
  expect_value_error([&] { check_finite(d, "big"); }, {"sample 700 feature 5 is +Inf"});
  set(d, 700, 5, 0.0f);
  expect_value_error([&] { check_finite(d, "big"); }, {"sample 999 feature 783 is NaN"});
}

TEST(DataCheckFinite, Works16BitAndMultiDimensionalImages) {
  std::vector<float> v(2 * 3 * 4, 0.5f);
  v[1 * 12 + 2 * 4 + 1] = std::numeric_limits<float>::infinity();  // sample 1, feature (2,1) = 9
  for (const DType dt : {DType::bf16, DType::f16}) {
    Dataset d;
    d.images = Tensor::from_vector(v, {2, 3, 4}, dt);
    d.labels = {0, 1};
    expect_value_error([&] { check_finite(d, "images"); }, {"sample 1 feature 9 is +Inf"});
  }
  // 70000 in f16 rounds to Inf: the check sees what training would see.
  Dataset h = make(4, 3, DType::f16);
  std::vector<float> w = h.images.to_vector();
  w[2 * 3 + 1] = 70000.0f;
  h.images = Tensor::from_vector(w, {4, 3}, DType::f16);
  expect_value_error([&] { check_finite(h, "half"); }, {"sample 2 feature 1 is +Inf"});
}

TEST(DataCheckFinite, RejectsLabelCountMismatch) {
  Dataset d = make(5, 2);
  d.labels.pop_back();
  expect_value_error([&] { check_finite(d, "train"); }, {"train", "5 samples but 4 labels"});
}

TEST(DataCheckLabels, AcceptsInRangeAndNamesFirstBadLabel) {
  Dataset d = make(12, 2);
  EXPECT_NO_THROW(check_labels(d, 10, "train"));
  d.labels[7] = 10;
  d.labels[9] = -1;
  expect_value_error([&] { check_labels(d, 10, "train labels"); },
                     {"check_labels", "train labels", "sample 7 has label 10", "[0, 10)"});
  d.labels[7] = 3;
  expect_value_error([&] { check_labels(d, 10, "train labels"); }, {"sample 9 has label -1"});
  EXPECT_NO_THROW(check_labels(make(3, 1), 3, "ok"));  // labels 0, 1, 2 with 3 classes
  expect_value_error([&] { check_labels(make(3, 1), 2, "x"); }, {"sample 2 has label 2"});
  expect_value_error([&] { check_labels(make(3, 1), 0, "x"); }, {"num_classes", "got 0"});
}

TEST(DataSubset, CopiesTheRequestedRows) {
  Dataset d = make(10, 3);
  const Dataset s = subset(d, 4, 3);
  ASSERT_EQ(s.images.shape(), (Shape{3, 3}));
  EXPECT_EQ(s.labels, (std::vector<std::int64_t>{4, 5, 6}));
  const std::vector<float> all = d.images.to_vector();
  const std::vector<float> got = s.images.to_vector();
  for (std::size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], all[12 + k]) << k;
  EXPECT_EQ(s.images.category(), MemoryCategory::workspace);
  // A copy: writing the original leaves the subset alone.
  set(d, 4, 0, 99.0f);
  EXPECT_EQ(s.images.to_vector()[0], all[12]);
  // Edges: the whole set, an empty tail, a multi-dimensional bf16 set keeps its shape.
  EXPECT_EQ(subset(d, 0, 10).labels.size(), 10u);
  EXPECT_EQ(subset(d, 10, 0).images.shape(), (Shape{0, 3}));
  Dataset m;
  m.images = Tensor::from_vector(std::vector<float>(5 * 2 * 2, 1.5f), {5, 2, 2}, DType::bf16);
  m.labels = {0, 1, 2, 3, 4};
  const Dataset ms = subset(m, 1, 2);
  EXPECT_EQ(ms.images.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(ms.images.dtype(), DType::bf16);
  EXPECT_EQ(ms.labels, (std::vector<std::int64_t>{1, 2}));
}

TEST(DataSubset, RejectsOutOfRange) {
  const Dataset d = make(10, 3);
  expect_value_error([&] { subset(d, 8, 3); }, {"subset", "[8, 8 + 3)", "10 samples"});
  expect_value_error([&] { subset(d, -1, 2); }, {"[-1, -1 + 2)"});
  expect_value_error([&] { subset(d, 0, -1); }, {"10 samples"});
  expect_value_error([&] { subset(d, 11, 0); }, {"10 samples"});
}

}  // namespace
}  // namespace mixprec::data
