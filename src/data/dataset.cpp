// Dataset checks. check_finite runs one whole-tensor max-|x| reduction (vectorised, threaded,
// NaN-propagating), which settles the common all-finite case at memory bandwidth; only when it
// finds a NaN or Inf does a second, per-sample pass locate the first one for the message.
#include "mixprec/core/transfer.h"
#include "mixprec/data/dataset.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/backend.h"
#include "mixprec/kernels/convert_arrays.h"
#include "mixprec/core/error.h"

namespace mixprec::data {
namespace {

// Checks images is [N, ...] with N matching the labels (or, for regression data, the values);
// returns N.
std::int64_t checked_count(const Dataset& d, const char* op, const std::string& what) {
  MIXPREC_CHECK(d.images.defined(), ValueError, op, what << ": the data set has no images tensor");
  MIXPREC_CHECK(d.images.dim() >= 1, ValueError, op,
                what << ": images must be [N, features...], got a 0-d tensor");
  const std::int64_t n = d.images.size(0);
  const bool regression = d.labels.empty() && !d.values.empty();
  const std::size_t targets = regression ? d.values.size() : d.labels.size();
  MIXPREC_CHECK(n == static_cast<std::int64_t>(targets), ValueError, op,
                what << ": " << n << " samples but " << targets << (regression ? " target values" : " labels")
                     << "; every sample needs exactly one");
  return n;
}

// Elements per sample (product of the dimensions after the first).
std::int64_t per_sample(const Tensor& images) {
  std::int64_t d = 1;
  for (std::int64_t i = 1; i < images.dim(); ++i) d *= images.size(i);
  return d;
}

bool finite_value(float v) { return std::abs(v) <= std::numeric_limits<float>::max(); }

}  // namespace

void check_finite(const Dataset& d, const std::string& what) {
  constexpr const char* op = "check_finite";
  const std::int64_t n = checked_count(d, op, what);
  const Tensor x = d.images.is_contiguous() ? d.images : d.images.contiguous();
  const std::int64_t features = per_sample(x);
  if (n == 0 || features == 0) return;
  float amax = 0.0f;
  // Data sets live on the host (the loader uploads each batch): the host's kernels scan them.
  const kernels::Backend& host = kernels::host_backend();
  host.reduce(kernels::ReduceOp::amax, x.data_ptr(), x.dtype(), 1, n * features, 1, &amax,
              DType::f32);
  if (finite_value(amax)) return;

  // Error path: per-sample max-|x| finds the first bad sample, then its row is scanned.
  std::vector<float> per(static_cast<std::size_t>(n));
  host.reduce(kernels::ReduceOp::amax, x.data_ptr(), x.dtype(), n, features, 1, per.data(),
              DType::f32);
  std::int64_t sample = 0;
  while (sample < n && finite_value(per[static_cast<std::size_t>(sample)])) ++sample;
  MIXPREC_ASSERT(sample < n);
  std::vector<float> row(static_cast<std::size_t>(features));
  const auto* base = static_cast<const unsigned char*>(x.data_ptr());
  convert(base + static_cast<std::size_t>(sample * features) * size_of(x.dtype()), x.dtype(),
          row.data(), DType::f32, row.size());
  for (std::size_t j = 0; j < row.size(); ++j) {
    const float v = row[j];
    if (finite_value(v)) continue;
    const char* kind = std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
    MIXPREC_CHECK(false, ValueError, op,
                  what << ": sample " << sample << " feature " << j << " is " << kind
                       << "; clean the data or drop the row");
  }
  MIXPREC_ASSERT(false);  // the reduction saw a non-finite value in this row
}

void check_labels(const Dataset& d, std::int64_t num_classes, const std::string& what) {
  constexpr const char* op = "check_labels";
  MIXPREC_CHECK(num_classes >= 1, ValueError, op,
                what << ": num_classes must be at least 1, got " << num_classes);
  checked_count(d, op, what);
  for (std::size_t i = 0; i < d.labels.size(); ++i) {
    const std::int64_t label = d.labels[i];
    MIXPREC_CHECK(label >= 0 && label < num_classes, ValueError, op,
                  what << ": sample " << i << " has label " << label << ", outside [0, "
                       << num_classes << "); fix the labels or the number of classes");
  }
}

Dataset subset(const Dataset& d, std::int64_t begin, std::int64_t count) {
  constexpr const char* op = "subset";
  const std::int64_t n = checked_count(d, op, "the data set");
  MIXPREC_CHECK(begin >= 0 && count >= 0 && begin <= n && count <= n - begin, ValueError, op,
                "samples [" << begin << ", " << begin << " + " << count
                            << ") are not within the data set's " << n << " samples");
  const Tensor x = d.images.is_contiguous() ? d.images : d.images.contiguous();
  Shape shape = x.shape();
  shape[0] = count;
  Dataset out;
  out.images = Tensor::empty(shape, x.dtype(), MemoryCategory::workspace, Device{});
  const std::size_t row_bytes = static_cast<std::size_t>(per_sample(x)) * size_of(x.dtype());
  if (count > 0 && row_bytes > 0) {
    std::memcpy(out.images.data_ptr(),
                static_cast<const unsigned char*>(x.data_ptr()) + static_cast<std::size_t>(begin) * row_bytes,
                static_cast<std::size_t>(count) * row_bytes);
  }
  if (!d.labels.empty()) out.labels.assign(d.labels.begin() + begin, d.labels.begin() + begin + count);
  if (!d.values.empty()) out.values.assign(d.values.begin() + begin, d.values.begin() + begin + count);
  return out;
}

}  // namespace mixprec::data
