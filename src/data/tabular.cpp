// Tables for training. The statistics come from the training rows alone: computing them over
// the held-out rows too would leak those rows into the model's inputs, and the validation score
// would no longer measure what happens on unseen data.
#include "mixprec/data/tabular.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "mixprec/core/error.h"
#include "mixprec/core/random.h"
#include "mixprec/data/csv.h"
#include "mixprec/data/dataset.h"

namespace mixprec::data {
namespace {

constexpr const char* kOp = "tabular";
// Class ids index a logits row; a larger id is a value column read as classes by mistake.
constexpr std::int64_t kMaxClasses = 65536;

Dataset take(const Dataset& d, const std::vector<std::int64_t>& rows) {
  const std::int64_t f = d.images.size(1);
  Dataset out;
  out.images = Tensor::empty({static_cast<std::int64_t>(rows.size()), f}, DType::f32, MemoryCategory::workspace, Device{});
  const float* src = d.images.data<float>();
  float* dst = out.images.data<float>();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(src + rows[i] * f, f, dst + static_cast<std::int64_t>(i) * f);
    if (!d.labels.empty()) out.labels.push_back(d.labels[static_cast<std::size_t>(rows[i])]);
    if (!d.values.empty()) out.values.push_back(d.values[static_cast<std::size_t>(rows[i])]);
  }
  return out;
}

void check_classes(TabularData& t, const TabularOptions& o) {
  std::set<std::int64_t> seen(t.train.labels.begin(), t.train.labels.end());
  const std::string file = o.train_path;
  MIXPREC_CHECK(seen.size() >= 2, ValueError, kOp,
                file << ": the target column '" << t.schema.target << "' holds a single class ("
                     << (seen.empty() ? -1 : *seen.begin())
                     << ") in the training rows; classification needs at least two (a real-valued "
                        "target needs --task regression)");
  const std::int64_t top = *seen.rbegin();
  MIXPREC_CHECK(top < kMaxClasses, ValueError, kOp,
                file << ": the target column '" << t.schema.target << "' has class id " << top
                     << "; class ids must be 0..K-1 with K <= " << kMaxClasses
                     << " (is it a real-valued target? use --task regression)");
  t.schema.num_classes = top + 1;
  for (std::size_t i = 0; i < t.test.labels.size(); ++i) {
    MIXPREC_CHECK(t.test.labels[i] < t.schema.num_classes, ValueError, kOp,
                  (o.test_path.empty() ? file : o.test_path)
                      << ": held-out sample " << i << " has class " << t.test.labels[i]
                      << ", but the training rows have classes 0.." << top
                      << "; the model has no output for it");
  }
}

void standardise_target(TabularData& t, const TabularOptions& o) {
  double sum = 0, sq = 0;
  for (const float v : t.train.values) sum += v;
  const double mean = sum / static_cast<double>(t.train.values.size());
  for (const float v : t.train.values) sq += (v - mean) * (v - mean);
  const double stddev = std::sqrt(sq / static_cast<double>(t.train.values.size()));
  MIXPREC_CHECK(stddev > 0 && std::isfinite(stddev), ValueError, kOp,
                o.train_path << ": the target column '" << t.schema.target
                             << "' is constant in the training rows; there is nothing to learn");
  t.schema.target_mean = static_cast<float>(mean);
  t.schema.target_stddev = static_cast<float>(stddev);
  for (Dataset* d : {&t.train, &t.test}) {
    for (float& v : d->values) v = static_cast<float>((v - mean) / stddev);
  }
}

}  // namespace

std::vector<std::int64_t> held_out_rows(std::int64_t n, double fraction, std::uint64_t seed) {
  MIXPREC_CHECK(n >= 2, ValueError, kOp,
                "holding out rows needs at least 2 rows, got " << n << "; give a separate test file");
  MIXPREC_CHECK(fraction > 0 && fraction < 1, ValueError, kOp,
                "the held-out fraction must be in (0, 1), got " << fraction);
  const auto m = std::clamp<std::int64_t>(std::llround(fraction * static_cast<double>(n)), 1, n - 1);
  const std::uint64_t base = splitmix64(seed);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto key = [base](std::int64_t i) { return splitmix64(base ^ static_cast<std::uint64_t>(i)); };
  std::partial_sort(order.begin(), order.begin() + m, order.end(), [&](std::int64_t a, std::int64_t b) {
    const std::uint64_t ka = key(a), kb = key(b);
    return ka != kb ? ka < kb : a < b;
  });
  order.resize(static_cast<std::size_t>(m));
  std::sort(order.begin(), order.end());
  return order;
}

TabularData load_tabular(const TabularOptions& o) {
  CsvOptions co;
  co.label_column = o.target;
  co.target = o.regression ? CsvTarget::value : CsvTarget::class_id;
  co.standardize = false;
  CsvDataset all = read_csv(o.train_path, co);
  TabularData t;
  t.schema.features = all.feature_names;
  t.schema.target = all.target_name;
  t.schema.regression = o.regression;
  if (!o.test_path.empty()) {
    // The test file's features are matched by name, so its columns may come in another order.
    co.feature_columns = all.feature_names;
    co.label_column = all.target_name;
    t.test = read_csv(o.test_path, co).data;
    t.train = std::move(all.data);
  } else {
    const std::int64_t n = all.data.images.size(0);
    MIXPREC_CHECK(n >= 2, ValueError, kOp,
                  o.train_path << ": one data row cannot be split into training and validation rows; "
                                  "add rows or give a test file (--test-data)");
    const std::vector<std::int64_t> held = held_out_rows(n, o.val_fraction, o.seed);
    std::vector<std::int64_t> kept;
    std::size_t h = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (h < held.size() && held[h] == i) {
        ++h;
      } else {
        kept.push_back(i);
      }
    }
    t.train = take(all.data, kept);
    t.test = take(all.data, held);
  }
  if (o.regression) {
    standardise_target(t, o);
  } else {
    check_classes(t, o);
  }
  column_statistics(t.train, t.schema.mean, t.schema.stddev);
  standardize_with(t.train, t.schema.mean, t.schema.stddev);
  standardize_with(t.test, t.schema.mean, t.schema.stddev);
  return t;
}

Dataset read_tabular_inputs(const std::string& path, const TabularSchema& schema) {
  CsvOptions co;
  co.target = CsvTarget::none;
  co.feature_columns = schema.features;
  co.standardize = false;
  Dataset d = read_csv(path, co).data;
  standardize_with(d, schema.mean, schema.stddev);
  return d;
}

}  // namespace mixprec::data
