// Tables made ready for training (data/tabular.h): the held-out rows (a replayable function of
// the seed, checked against values computed with the Python in tests/cli/csv_data.sh), the
// statistics taken from the training rows only, class counts and regression target scaling,
// rows read by name for prediction, and the errors of each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/data/tabular.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;

class DataTabular : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("mixprec_tabular_" + std::to_string(::getpid()) + "_" + info->name());
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

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "(no ValueError)";
}

TEST(DataTabularSplit, HeldOutRowsReplayThePythonDefinition) {
  // sorted(range(n), key=lambda i: (splitmix64(splitmix64(seed) ^ i), i))[:m], then sorted.
  EXPECT_EQ(held_out_rows(10, 0.3, 1), (std::vector<std::int64_t>{6, 8, 9}));
  EXPECT_EQ(held_out_rows(20, 0.25, 0), (std::vector<std::int64_t>{1, 4, 5, 13, 18}));
}

TEST(DataTabularSplit, HeldOutRowsAreDistinctSortedClampedAndSeeded) {
  const std::vector<std::int64_t> a = held_out_rows(1000, 0.2, 7);
  ASSERT_EQ(a.size(), 200u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<std::int64_t>(a.begin(), a.end()).size(), a.size());
  EXPECT_EQ(a, held_out_rows(1000, 0.2, 7));
  EXPECT_NE(a, held_out_rows(1000, 0.2, 8));
  EXPECT_EQ(held_out_rows(2, 0.01, 0).size(), 1u);  // at least one row held out
  EXPECT_EQ(held_out_rows(2, 0.99, 0).size(), 1u);  // and at least one kept
  EXPECT_NE(error_of([] { held_out_rows(1, 0.5, 0); }).find("at least 2 rows"), std::string::npos);
  EXPECT_NE(error_of([] { held_out_rows(10, 1.0, 0); }).find("(0, 1)"), std::string::npos);
}

TEST_F(DataTabular, StatisticsComeFromTheTrainingRowsOnly) {
  // x = i, so the held-out rows move the mean if they leak into it; class = i % 2.
  std::string text = "x,class\n";
  for (int i = 0; i < 10; ++i) text += std::to_string(i * i) + "," + std::to_string(i % 2) + "\n";
  TabularOptions o;
  o.train_path = write("t.csv", text);
  o.target = "class";
  o.val_fraction = 0.3;
  o.seed = 1;
  const TabularData t = load_tabular(o);
  const std::vector<std::int64_t> held = held_out_rows(10, 0.3, 1);
  double sum = 0, sq = 0;
  std::vector<double> kept;
  for (int i = 0; i < 10; ++i) {
    if (std::find(held.begin(), held.end(), i) == held.end()) kept.push_back(i * i);
  }
  for (const double v : kept) sum += v;
  const double mean = sum / static_cast<double>(kept.size());
  for (const double v : kept) sq += (v - mean) * (v - mean);
  const double stddev = std::sqrt(sq / static_cast<double>(kept.size()));
  ASSERT_EQ(t.schema.mean.size(), 1u);
  EXPECT_FLOAT_EQ(t.schema.mean[0], static_cast<float>(mean));
  EXPECT_FLOAT_EQ(t.schema.stddev[0], static_cast<float>(stddev));
  EXPECT_EQ(t.train.images.size(0), 7);
  ASSERT_EQ(t.test.images.size(0), 3);
  // The held-out rows are standardised with the training statistics, in file order.
  const std::vector<float> x = t.test.images.to_vector();
  for (std::size_t k = 0; k < held.size(); ++k) {
    const double v = static_cast<double>(held[k] * held[k]);
    EXPECT_FLOAT_EQ(x[k], static_cast<float>((v - mean) / stddev));
    EXPECT_EQ(t.test.labels[k], held[k] % 2);
  }
  EXPECT_EQ(t.schema.features, (std::vector<std::string>{"x"}));
  EXPECT_EQ(t.schema.target, "class");
  EXPECT_EQ(t.schema.num_classes, 2);
  EXPECT_FALSE(t.schema.regression);
}

TEST_F(DataTabular, ATestFileIsMatchedByNameAndScaledWithTheTrainingStatistics) {
  TabularOptions o;
  o.train_path = write("train.csv", "a,b,y\n0,10,0\n2,30,1\n4,20,2\n");
  o.test_path = write("test.csv", "y,b,a\n1,20,2\n");  // other column order
  o.target = "y";
  const TabularData t = load_tabular(o);
  EXPECT_EQ(t.schema.num_classes, 3);
  EXPECT_FLOAT_EQ(t.schema.mean[0], 2.0f);
  EXPECT_FLOAT_EQ(t.schema.mean[1], 20.0f);
  EXPECT_EQ(t.test.images.to_vector(), (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(t.test.labels, (std::vector<std::int64_t>{1}));
}

TEST_F(DataTabular, RegressionTargetsAreStandardisedWithTheTrainingRows) {
  TabularOptions o;
  o.train_path = write("train.csv", "x,y\n1,10\n2,20\n3,30\n4,40\n");
  o.test_path = write("test.csv", "x,y\n5,50\n");
  o.target = "y";
  o.regression = true;
  const TabularData t = load_tabular(o);
  EXPECT_TRUE(t.schema.regression);
  EXPECT_EQ(t.schema.num_classes, 0);
  EXPECT_FLOAT_EQ(t.schema.target_mean, 25.0f);
  EXPECT_FLOAT_EQ(t.schema.target_stddev, std::sqrt(125.0f));
  EXPECT_TRUE(t.train.labels.empty());
  ASSERT_EQ(t.test.values.size(), 1u);
  EXPECT_FLOAT_EQ(t.test.values[0], 25.0f / std::sqrt(125.0f));
}

TEST_F(DataTabular, ReadsPredictionInputsByNameIgnoringOtherColumns) {
  TabularSchema s;
  s.features = {"a", "b"};
  s.mean = {1.0f, 10.0f};
  s.stddev = {1.0f, 2.0f};
  const std::string path = write("in.csv", "id,b,y,a\nfoo,14,whatever,3\n");
  const Dataset d = read_tabular_inputs(path, s);
  EXPECT_EQ(d.images.to_vector(), (std::vector<float>{2.0f, 2.0f}));
  const std::string missing = write("missing.csv", "b\n1\n");
  const std::string msg = error_of([&] { read_tabular_inputs(missing, s); });
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("no column named 'a'"), std::string::npos) << msg;
}

TEST_F(DataTabular, Errors) {
  TabularOptions o;
  o.target = "y";
  o.train_path = write("one_class.csv", "x,y\n1,2\n2,2\n3,2\n");
  EXPECT_NE(error_of([&] { load_tabular(o); }).find("holds a single class (2)"), std::string::npos);
  o.train_path = write("huge_class.csv", "x,y\n1,0\n2,70000\n");
  o.test_path = o.train_path;  // no split: both classes stay in the training rows
  EXPECT_NE(error_of([&] { load_tabular(o); }).find("class id 70000"), std::string::npos);
  o.test_path.clear();
  o.train_path = write("one_row.csv", "x,y\n1,0\n");
  EXPECT_NE(error_of([&] { load_tabular(o); }).find("one data row"), std::string::npos);
  o.train_path = write("train.csv", "x,y\n1,0\n2,1\n");
  o.test_path = write("test.csv", "x,y\n1,5\n");
  const std::string unseen = error_of([&] { load_tabular(o); });
  EXPECT_NE(unseen.find(o.test_path), std::string::npos) << unseen;
  EXPECT_NE(unseen.find("has class 5"), std::string::npos) << unseen;
  o.test_path.clear();
  o.regression = true;
  o.train_path = write("constant.csv", "x,y\n1,3\n2,3\n3,3\n");
  EXPECT_NE(error_of([&] { load_tabular(o); }).find("is constant"), std::string::npos);
}

}  // namespace
}  // namespace mixprec::data
