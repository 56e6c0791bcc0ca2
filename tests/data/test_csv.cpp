// CSV reading: values, labels, names and standardisation of a good file (hand-computed
// statistics); header/no-header, label column by name, delimiters, CRLF and blank lines; the
// same statistics applied to a test file; and each kind of bad file, with the message naming
// the file, line and column.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/expect_error.h"
#include "mixprec/core/error.h"
#include "mixprec/data/csv.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;

using testing::expect_value_error;

// Builds CsvOptions by name (GCC 12 warns about designated initializers that omit members).
struct Opts {
  CsvOptions o;
  Opts& label(const std::string& name) { o.label_column = name; return *this; }
  Opts& no_header() { o.has_header = false; return *this; }
  Opts& delimiter(char c) { o.delimiter = c; return *this; }
  Opts& raw() { o.standardize = false; return *this; }
  operator CsvOptions() const { return o; }  // NOLINT: implicit on purpose
};

class DataCsvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("mixprec_csv_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  fs::path dir_;
};

using DataCsv = DataCsvTest;
using DataCsvErrors = DataCsvTest;

TEST_F(DataCsv, ReadsRawValuesLabelsAndNames) {
  const std::string path = write("a.csv", "x,y,label\n1,10,0\n2,20,1\n3,30,2\n4,40,1\n");
  const CsvDataset d = read_csv(path, Opts().raw());
  ASSERT_EQ(d.data.images.shape(), (Shape{4, 2}));
  EXPECT_EQ(d.data.images.dtype(), DType::f32);
  EXPECT_EQ(d.data.images.to_vector(), (std::vector<float>{1, 10, 2, 20, 3, 30, 4, 40}));
  EXPECT_EQ(d.data.labels, (std::vector<std::int64_t>{0, 1, 2, 1}));
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"x", "y"}));
  // Statistics are reported even without standardising: mean 2.5, population std sqrt(1.25).
  ASSERT_EQ(d.mean.size(), 2u);
  EXPECT_FLOAT_EQ(d.mean[0], 2.5f);
  EXPECT_FLOAT_EQ(d.mean[1], 25.0f);
  EXPECT_FLOAT_EQ(d.stddev[0], std::sqrt(1.25f));
  EXPECT_FLOAT_EQ(d.stddev[1], std::sqrt(125.0f));
}

TEST_F(DataCsv, StandardisesWithKnownValuesAndZeroesConstantColumns) {
  // Column x: 1..4 (mean 2.5, std sqrt(1.25)); c: constant 7; z: -2, 0, 0, 2 (mean 0, std sqrt 2).
  const std::string path = write("s.csv", "x,c,label,z\n1,7,0,-2\n2,7,1,0\n3,7,0,0\n4,7,1,2\n");
  const CsvDataset d = read_csv(path, Opts().label("label"));
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"x", "c", "z"}));
  EXPECT_EQ(d.data.labels, (std::vector<std::int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(d.mean[1], 7.0f);  // the constant column's exact value
  EXPECT_EQ(d.stddev[1], 0.0f);
  const std::vector<float> v = d.data.images.to_vector();
  const float s = 1.0f / std::sqrt(1.25f);  // x: (i - 2.5) / sqrt(1.25)
  const std::vector<float> expected = {-1.5f * s, 0, -std::sqrt(2.0f),
                                       -0.5f * s, 0, 0,
                                       0.5f * s,  0, 0,
                                       1.5f * s,  0, std::sqrt(2.0f)};
  ASSERT_EQ(v.size(), expected.size());
  // One rounding of a double computation against a float formula with three roundings:
  // values are below 2, where a float ulp is 1.2e-7, so 1e-6 allows a few ulps.
  for (std::size_t k = 0; k < v.size(); ++k) EXPECT_NEAR(v[k], expected[k], 1e-6f) << k;
  // Standardised columns have mean 0 and population std 1.
  for (const std::size_t j : {0u, 2u}) {
    double sum = 0, sq = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      sum += v[i * 3 + j];
      sq += double{v[i * 3 + j]} * v[i * 3 + j];
    }
    EXPECT_NEAR(sum / 4, 0.0, 1e-6);
    EXPECT_NEAR(sq / 4, 1.0, 1e-6);
  }
}

TEST_F(DataCsv, StandardiseEqualsRawPlusStandardizeWith) {
  const std::string text = "a;b;y\n0.25;-3e2;1\n1.5;  17.125 ;0\n-7;+4;2\n1e-3;0.5;1\n";
  const std::string path = write("e.csv", text);
  const CsvDataset standardised = read_csv(path, Opts().delimiter(';'));
  CsvDataset raw = read_csv(path, Opts().delimiter(';').raw());
  EXPECT_EQ(raw.data.images.to_vector(), (std::vector<float>{0.25f, -300, 1.5f, 17.125f, -7, 4, 1e-3f, 0.5f}));
  standardize_with(raw.data, standardised.mean, standardised.stddev);
  EXPECT_EQ(raw.data.images.to_vector(), standardised.data.images.to_vector());  // bit for bit
}

TEST_F(DataCsv, TestFileUsesTrainingStatistics) {
  const CsvDataset train = read_csv(write("train.csv", "f,g,y\n0,5,0\n2,5,1\n4,5,0\n"));
  // f: mean 2, std sqrt(8/3); g constant 5 (a different test value must still give 0).
  CsvDataset test = read_csv(write("test.csv", "f,g,y\n2,9,1\n6,5,0\n"), Opts().raw());
  standardize_with(test.data, train.mean, train.stddev);
  const std::vector<float> v = test.data.images.to_vector();
  const float sd = static_cast<float>(std::sqrt(8.0 / 3.0));
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_NEAR(v[2], 4.0f / sd, 1e-6f);
  EXPECT_EQ(v[3], 0.0f);
  expect_value_error([&] { standardize_with(test.data, {1.0f}, {1.0f}); },
                     {"standardize_with", "2 features", "1 means"});
  expect_value_error([&] { standardize_with(test.data, {0, 0}, {1, -1}); }, {"feature 1", "stddev -1"});
  // A value far outside a tiny training spread overflows f32: reported, not turned into Inf.
  // (row 1's 4 / sd = 2.45 divided by a subnormal 1e-39 exceeds f32's 3.4e38)
  expect_value_error([&] { standardize_with(test.data, {0, 0}, {1e-39f, 1}); },
                     {"sample 1 feature 0", "far outside"});
}

TEST_F(DataCsv, NoHeaderCrlfBlankLinesBomTabsAndIntegerValuedFloatLabels) {
  const std::string path = write("n.tsv", "\xEF\xBB\xBF" "1\t2\t3.0\r\n\r\n  4 \t5\t0\r\n\n");
  const CsvDataset d = read_csv(path, Opts().no_header().delimiter('\t').raw());
  EXPECT_EQ(d.data.images.to_vector(), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(d.data.labels, (std::vector<std::int64_t>{3, 0}));
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"column 1", "column 2"}));
  // Quoted header names lose their quotes; the label column may come first.
  const CsvDataset q = read_csv(write("q.csv", "\"cls\",\"w h\"\n1,0.5\n0,1.5\n"),
                                Opts().label("cls").raw());
  EXPECT_EQ(q.feature_names, (std::vector<std::string>{"w h"}));
  EXPECT_EQ(q.data.labels, (std::vector<std::int64_t>{1, 0}));
  EXPECT_EQ(q.data.images.to_vector(), (std::vector<float>{0.5f, 1.5f}));
}

TEST_F(DataCsvErrors, MissingEmptyAndHeaderOnlyFiles) {
  const std::string missing = (dir_ / "nope.csv").string();
  expect_value_error([&] { read_csv(missing); }, {"read_csv", missing, "missing"});
  expect_value_error([&] { read_csv(dir_.string()); }, {dir_.string(), "directory"});
  const std::string empty = write("empty.csv", "");
  expect_value_error([&] { read_csv(empty); }, {empty, "empty"});
  const std::string blank = write("blank.csv", "\n  \n\r\n");
  expect_value_error([&] { read_csv(blank); }, {blank, "empty", "only blank lines"});
  const std::string header = write("header.csv", "a,b,label\n");
  expect_value_error([&] { read_csv(header); }, {header, "no data rows"});
}

TEST_F(DataCsvErrors, RaggedRowsAndWrongDelimiter) {
  const std::string path = write("r.csv", "a,b,label\n1,2,0\n\n3,4\n");
  expect_value_error([&] { read_csv(path); }, {path, "line 4 has 2 fields, expected 3", "the header"});
  const std::string trailing = write("t.csv", "a,b,label\n1,2,0,\n");
  expect_value_error([&] { read_csv(trailing); }, {"line 2 has 4 fields", "trailing delimiter"});
  const std::string no_header = write("nh.csv", "1,2,0\n1,2\n");
  expect_value_error([&] { read_csv(no_header, Opts().no_header()); }, {"line 2", "as line 1 has"});
  const std::string semicolons = write("semi.csv", "a;b;label\n1;2;0\n");
  expect_value_error([&] { read_csv(semicolons); }, {semicolons, "line 1 has one column", "delimiter", "','"});
}

TEST_F(DataCsvErrors, NonNumericEmptyNanInfAndOutOfRangeCells) {
  const std::string bad = write("bad.csv", "a,b,label\n1,2,0\n3,abc,1\n");
  expect_value_error([&] { read_csv(bad); }, {bad, "line 3, column 2 ('b')", "'abc' is not a number"});
  const std::string partial = write("partial.csv", "a,b,label\n1,2.5x,0\n");
  expect_value_error([&] { read_csv(partial); }, {"line 2, column 2", "'2.5x' is not a number"});
  const std::string empty_cell = write("ec.csv", "a,b,label\n1,,0\n");
  expect_value_error([&] { read_csv(empty_cell); }, {"line 2, column 2", "empty cell"});
  for (const std::string nan : {"nan", "NaN", "-nan"}) {
    const std::string path = write("nan.csv", "a,b,label\n1,2,0\n" + nan + ",4,1\n");
    expect_value_error([&] { read_csv(path); }, {path, "line 3, column 1 ('a')", "is NaN", "clean the data"});
  }
  for (const std::string inf : {"inf", "-Infinity", "+inf"}) {
    const std::string path = write("inf.csv", "a,b,label\n1," + inf + ",0\n");
    expect_value_error([&] { read_csv(path); }, {path, "line 2, column 2 ('b')", "is infinite"});
  }
  const std::string big = write("big.csv", "a,b,label\n1,1e39,0\n");
  expect_value_error([&] { read_csv(big); }, {"line 2, column 2", "'1e39'", "outside the f32 range"});
  const std::string huge = write("huge.csv", "a,b,label\n1,-1e999,0\n");
  expect_value_error([&] { read_csv(huge); }, {"'-1e999'", "outside the f32 range"});
  // Underflow is not an error: the value becomes 0 (or a subnormal).
  EXPECT_EQ(read_csv(write("tiny.csv", "a,b,label\n1,1e-999,0\n"), Opts().raw())
                .data.images.to_vector()[1], 0.0f);
  const std::string text_header = write("th.csv", "a,b,label\n1,2,0\n");
  expect_value_error([&] { read_csv(text_header, Opts().no_header()); },
                     {"line 1, column 1:", "'a' is not a number", "has_header is false"});
}

TEST_F(DataCsvErrors, LabelColumnMissingOrAmbiguous) {
  const std::string path = write("l.csv", "a,b,target\n1,2,0\n");
  expect_value_error([&] { read_csv(path, Opts().label("label")); },
                     {path, "no column named 'label'", "a, b, target"});
  expect_value_error([&] { read_csv(path, Opts().label("a").no_header()); },
                     {"label_column 'a'", "has_header is false"});
  const std::string twice = write("twice.csv", "y,a,y\n1,2,0\n");
  expect_value_error([&] { read_csv(twice, Opts().label("y")); }, {"two columns named 'y'", "1 and 3"});
}

TEST_F(DataCsvErrors, NegativeNonIntegerAndNonNumericLabels) {
  const std::string neg = write("neg.csv", "a,label\n1,0\n2,-1\n");
  expect_value_error([&] { read_csv(neg); }, {neg, "line 3, column 2 ('label')", "'-1' is negative"});
  const std::string frac = write("frac.csv", "a,label\n1,1.5\n");
  expect_value_error([&] { read_csv(frac); }, {frac, "line 2, column 2", "'1.5' is not an integer"});
  const std::string name = write("name.csv", "a,label\n1,cat\n");
  expect_value_error([&] { read_csv(name); }, {"'cat' is not a class id", "map class names"});
  const std::string nan = write("nanl.csv", "a,label\n1,nan\n");
  expect_value_error([&] { read_csv(nan); }, {"'nan' is not a class id"});
  const std::string empty = write("el.csv", "a,label\n1,\n");
  expect_value_error([&] { read_csv(empty); }, {"line 2, column 2", "empty label"});
  const std::string large = write("large.csv", "a,label\n1,1e12\n");
  expect_value_error([&] { read_csv(large); }, {"absurdly large"});
}

TEST_F(DataCsv, ReadsRealValuedTargets) {
  CsvOptions o;
  o.label_column = "price";
  o.target = CsvTarget::value;
  o.standardize = false;
  const CsvDataset d = read_csv(write("r.csv", "price,x\n-1.5,1\n2e3,2\n"), o);
  EXPECT_TRUE(d.data.labels.empty());
  EXPECT_EQ(d.data.values, (std::vector<float>{-1.5f, 2000.0f}));
  EXPECT_EQ(d.target_name, "price");
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"x"}));
}

TEST_F(DataCsv, ReadsNamedFeaturesWithoutATarget) {
  CsvOptions o;
  o.target = CsvTarget::none;
  o.feature_columns = {"b", "a"};
  o.standardize = false;
  // The target and an id column are ignored, even though they are not numbers.
  const CsvDataset d = read_csv(write("p.csv", "id,a,label,b\nx1,1,cat,10\nx2,2,dog,20\n"), o);
  EXPECT_EQ(d.data.images.to_vector(), (std::vector<float>{10, 1, 20, 2}));
  EXPECT_TRUE(d.data.labels.empty() && d.data.values.empty());
  EXPECT_EQ(d.target_name, "");
  // Without feature_columns every column is a feature; one column is enough.
  CsvOptions all;
  all.target = CsvTarget::none;
  all.standardize = false;
  EXPECT_EQ(read_csv(write("one.csv", "a\n4\n"), all).data.images.to_vector(), (std::vector<float>{4}));
}

TEST_F(DataCsvErrors, TargetsFeaturesAndColumnCount) {
  CsvOptions value;
  value.label_column = "y";
  value.target = CsvTarget::value;
  const std::string word = write("w.csv", "x,y\n1,2\n3,abc\n");
  expect_value_error([&] { read_csv(word, value); }, {word, "line 3, column 2 ('y')", "'abc' is not a number"});
  const std::string nan = write("n.csv", "x,y\n1,nan\n");
  expect_value_error([&] { read_csv(nan, value); }, {nan, "line 2", "NaN, infinite"});

  CsvOptions named;
  named.target = CsvTarget::none;
  named.feature_columns = {"a", "missing"};
  const std::string p = write("m.csv", "a,b\n1,2\n");
  expect_value_error([&] { read_csv(p, named); }, {p, "no column named 'missing'", "a, b"});

  // A header of 1,000,001 columns (one more than kCsvMaxColumns) is refused by its count.
  const std::string wide = write("wide.csv", std::string(static_cast<std::size_t>(kCsvMaxColumns), ',') + "\n");
  expect_value_error([&] { read_csv(wide); }, {wide, "line 1 has 1000001 fields", "more than the 1000000"});
}

}  // namespace
}  // namespace mixprec::data
