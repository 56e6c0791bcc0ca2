// CSV reading: the whole file is read at once and cut into string_views, so no cell is copied;
// numbers are parsed with std::from_chars (locale-independent, unlike strtod), into double first
// so that a value beyond f32's range is reported rather than silently becoming Inf.
#include "mixprec/data/csv.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string_view>

#include "mixprec/core/error.h"

namespace mixprec::data {
namespace {

constexpr const char* kOp = "read_csv";
// Larger class ids are certainly a corrupt label column, and they would not fit a logits row.
constexpr double kMaxLabel = 2147483647.0;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Splits line at every delimiter into trimmed cells (reusing out's capacity).
void split(std::string_view line, char delimiter, std::vector<std::string_view>& out) {
  out.clear();
  for (;;) {
    const std::size_t pos = line.find(delimiter);
    out.push_back(trim(line.substr(0, pos)));
    if (pos == std::string_view::npos) return;
    line.remove_prefix(pos + 1);
  }
}

std::string delimiter_name(char c) {
  if (c == '\t') return "'\\t'";
  return std::string("'") + c + "'";
}

// One non-blank line of the file with its 1-based line number.
struct Line {
  std::string_view text;
  std::int64_t number = 0;
};

std::string read_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  MIXPREC_CHECK(status.type() != std::filesystem::file_type::not_found, ValueError, kOp,
                path << ": the file is missing (no such file); check the path");
  MIXPREC_CHECK(!ec, ValueError, kOp, path << ": cannot access the file (" << ec.message() << ")");
  MIXPREC_CHECK(!std::filesystem::is_directory(status), ValueError, kOp,
                path << ": is a directory, not a CSV file");
  std::ifstream in(path, std::ios::binary);
  MIXPREC_CHECK(in.good(), ValueError, kOp, path << ": cannot open the file; check its permissions");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  MIXPREC_CHECK(!in.bad(), ValueError, kOp, path << ": read failed");
  return text;
}

// Non-blank lines, without the line terminator and a leading UTF-8 byte-order mark.
std::vector<Line> split_lines(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // spreadsheets write one
  std::vector<Line> lines;
  std::int64_t number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    ++number;
    const std::string_view line = text.substr(0, end);
    if (!trim(line).empty()) lines.push_back({line, number});
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

enum class Parse { ok, empty, not_number, nan, inf, out_of_range };

// A finite double in f32's range, or why not.
Parse parse_number(std::string_view cell, double& value) {
  if (cell.empty()) return Parse::empty;
  std::string_view digits = cell;
  if (digits.size() > 1 && digits.front() == '+' && digits[1] != '-' && digits[1] != '+') {
    digits.remove_prefix(1);  // from_chars rejects an explicit '+'
  }
  const char* first = digits.data();
  const char* last = first + digits.size();
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::invalid_argument || ptr != last) return Parse::not_number;
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves value unset on overflow and underflow alike; strtod tells them apart
    // (the cell is a valid number, so it parses the same way).
    value = std::strtod(std::string(digits).c_str(), nullptr);
  }
  if (std::isnan(value)) return Parse::nan;
  if (std::isinf(value)) {
    // "inf"/"infinity" text, as opposed to a finite literal too large for double.
    const bool literal = std::isalpha(static_cast<unsigned char>(digits.back())) != 0;
    return literal ? Parse::inf : Parse::out_of_range;
  }
  if (std::abs(value) > std::numeric_limits<float>::max()) return Parse::out_of_range;
  return Parse::ok;
}

class CsvReader {
 public:
  CsvReader(const std::string& path, const CsvOptions& opts) : path_(path), opts_(opts) {}

  CsvDataset read() {
    MIXPREC_CHECK(opts_.delimiter != '\n' && opts_.delimiter != '\r' && opts_.delimiter != '"',
                  ValueError, kOp, path_ << ": the delimiter cannot be a newline or a double quote");
    const std::string text = read_file(path_);
    std::vector<Line> lines = split_lines(text);
    MIXPREC_CHECK(!lines.empty(), ValueError, kOp,
                  path_ << ": the file is empty" << (text.empty() ? "" : " (only blank lines)")
                        << "; expected a header line and one line per sample");
    // Count before splitting: a corrupt or binary first line with millions of delimiters must
    // fail here, not in allocating a name and a cell per column.
    const std::string_view first = lines.front().text;
    const auto header_fields = static_cast<std::int64_t>(std::count(first.begin(), first.end(), opts_.delimiter)) + 1;
    MIXPREC_CHECK(header_fields <= kCsvMaxColumns, ValueError, kOp,
                  path_ << ": line " << lines.front().number << " has " << header_fields
                        << " fields, more than the " << kCsvMaxColumns
                        << " columns a CSV file may have; is this a CSV file, and is the delimiter "
                        << delimiter_name(opts_.delimiter) << " right?");
    std::vector<std::string_view> cells;
    split(lines.front().text, opts_.delimiter, cells);
    columns_ = static_cast<std::int64_t>(cells.size());
    for (std::size_t c = 0; c < cells.size(); ++c) {
      std::string_view name = cells[c];
      if (opts_.has_header && name.size() >= 2 && name.front() == '"' && name.back() == '"') {
        name = name.substr(1, name.size() - 2);
      }
      names_.push_back(opts_.has_header && !name.empty() ? std::string(name)
                                                         : "column " + std::to_string(c + 1));
    }
    MIXPREC_CHECK(columns_ >= 2 || opts_.target == CsvTarget::none, ValueError, kOp,
                  path_ << ": line " << lines.front().number
                        << " has one column, but at least two are needed (features and a label);"
                        << " is the delimiter right? (it is " << delimiter_name(opts_.delimiter)
                        << ")");
    if (opts_.target != CsvTarget::none) find_label_column();
    choose_features();
    const std::size_t first_data = opts_.has_header ? 1 : 0;
    const auto n = static_cast<std::int64_t>(lines.size() - first_data);
    MIXPREC_CHECK(n >= 1, ValueError, kOp,
                  path_ << ": the file has a header line but no data rows");

    const auto features = static_cast<std::int64_t>(features_.size());
    CsvDataset out;
    out.data.images = Tensor::empty({n, features}, DType::f32, MemoryCategory::workspace, Device{});
    if (opts_.target == CsvTarget::class_id) out.data.labels.resize(static_cast<std::size_t>(n));
    if (opts_.target == CsvTarget::value) out.data.values.resize(static_cast<std::size_t>(n));
    float* x = out.data.images.data<float>();
    for (std::int64_t r = 0; r < n; ++r) {
      const Line& line = lines[first_data + static_cast<std::size_t>(r)];
      // Counted before splitting, like the header: a ragged row is reported as such.
      const auto fields =
          static_cast<std::size_t>(std::count(line.text.begin(), line.text.end(), opts_.delimiter)) + 1;
      check_field_count(line, fields, lines.front().number);
      split(line.text, opts_.delimiter, cells);
      float* row = x + r * features;
      for (std::int64_t k = 0; k < features; ++k) {
        const std::int64_t c = features_[static_cast<std::size_t>(k)];
        row[k] = static_cast<float>(parse_feature(cells[static_cast<std::size_t>(c)], line.number, c));
      }
      const auto rs = static_cast<std::size_t>(r);
      if (opts_.target == CsvTarget::class_id) {
        out.data.labels[rs] = parse_label(cells[static_cast<std::size_t>(label_)], line.number);
      } else if (opts_.target == CsvTarget::value) {
        out.data.values[rs] = parse_value(cells[static_cast<std::size_t>(label_)], line.number);
      }
    }
    for (const std::int64_t c : features_) out.feature_names.push_back(names_[static_cast<std::size_t>(c)]);
    if (label_ >= 0) out.target_name = names_[static_cast<std::size_t>(label_)];
    column_statistics(out.data, out.mean, out.stddev);
    if (opts_.standardize) standardize_with(out.data, out.mean, out.stddev);
    return out;
  }

 private:
  void find_label_column() {
    if (opts_.label_column.empty()) {
      label_ = columns_ - 1;
      return;
    }
    MIXPREC_CHECK(opts_.has_header, ValueError, kOp,
                  path_ << ": label_column '" << opts_.label_column
                        << "' names a column, but has_header is false; set has_header or leave "
                           "label_column empty to use the last column");
    label_ = -1;
    std::string all;
    for (std::int64_t c = 0; c < columns_; ++c) {
      const std::string& name = names_[static_cast<std::size_t>(c)];
      all += (c == 0 ? "" : ", ") + name;
      if (name != opts_.label_column) continue;
      MIXPREC_CHECK(label_ < 0, ValueError, kOp,
                    path_ << ": the header has two columns named '" << opts_.label_column << "' ("
                          << label_ + 1 << " and " << c + 1 << "); rename one");
      label_ = c;
    }
    MIXPREC_CHECK(label_ >= 0, ValueError, kOp,
                  path_ << ": no column named '" << opts_.label_column
                        << "' for the target (the labels); the header's columns are: " << all);
  }

  // The feature columns in output order: opts.feature_columns by name, else every column but
  // the target, in file order.
  void choose_features() {
    if (opts_.feature_columns.empty()) {
      for (std::int64_t c = 0; c < columns_; ++c) {
        if (c != label_) features_.push_back(c);
      }
      MIXPREC_CHECK(!features_.empty(), ValueError, kOp, path_ << ": the file has no feature column");
      return;
    }
    MIXPREC_CHECK(opts_.has_header, ValueError, kOp,
                  path_ << ": feature_columns name columns, but has_header is false");
    for (const std::string& want : opts_.feature_columns) {
      std::int64_t found = -1;
      for (std::int64_t c = 0; c < columns_; ++c) {
        if (names_[static_cast<std::size_t>(c)] != want) continue;
        MIXPREC_CHECK(found < 0, ValueError, kOp,
                      path_ << ": the header has two columns named '" << want << "' (" << found + 1
                            << " and " << c + 1 << "); rename one");
        found = c;
      }
      MIXPREC_CHECK(found >= 0, ValueError, kOp,
                    path_ << ": no column named '" << want
                          << "', a feature the model was trained on; the header's columns are: "
                          << all_names());
      features_.push_back(found);
    }
  }

  std::string all_names() const {
    std::string all;
    for (std::size_t c = 0; c < names_.size(); ++c) all += (c == 0 ? "" : ", ") + names_[c];
    return all;
  }

  void check_field_count(const Line& line, std::size_t count, std::int64_t first_line) const {
    const auto got = static_cast<std::int64_t>(count);
    if (got == columns_) return;
    MIXPREC_CHECK(false, ValueError, kOp,
                  path_ << ": line " << line.number << " has " << got << " fields, expected "
                        << columns_ << " (as "
                        << (opts_.has_header ? "the header" : "line " + std::to_string(first_line))
                        << " has)" << (got == columns_ + 1 ? "; a trailing delimiter?" : "")
                        << "; every row needs one value per column");
  }

  std::string where(std::int64_t line, std::int64_t column) const {
    std::ostringstream os;
    os << path_ << ": line " << line << ", column " << column + 1;
    if (opts_.has_header) os << " ('" << names_[static_cast<std::size_t>(column)] << "')";
    return os.str();
  }

  double parse_feature(std::string_view cell, std::int64_t line, std::int64_t column) const {
    double v = 0;
    switch (parse_number(cell, v)) {
      case Parse::ok: return v;
      case Parse::empty:
        MIXPREC_CHECK(false, ValueError, kOp,
                      where(line, column) << ": empty cell (a missing value); fill it in or drop the row");
        break;
      case Parse::not_number:
        MIXPREC_CHECK(false, ValueError, kOp,
                      where(line, column) << ": '" << cell << "' is not a number"
                                          << (opts_.has_header ? "" : " (does the file have a header? "
                                                                      "has_header is false)"));
        break;
      case Parse::nan:
        MIXPREC_CHECK(false, ValueError, kOp,
                      where(line, column) << ": '" << cell
                                          << "' is NaN, which training cannot use; clean the data "
                                             "or drop the row");
        break;
      case Parse::inf:
        MIXPREC_CHECK(false, ValueError, kOp,
                      where(line, column) << ": '" << cell
                                          << "' is infinite, which training cannot use; clean the "
                                             "data or drop the row");
        break;
      case Parse::out_of_range:
        MIXPREC_CHECK(false, ValueError, kOp,
                      where(line, column) << ": '" << cell
                                          << "' is outside the f32 range (|x| <= 3.4e38); rescale "
                                             "the column");
        break;
    }
    return 0;
  }

  std::int64_t parse_label(std::string_view cell, std::int64_t line) const {
    double v = 0;
    const Parse p = parse_number(cell, v);
    MIXPREC_CHECK(p != Parse::empty, ValueError, kOp,
                  where(line, label_) << ": empty label cell; every row needs a class id");
    MIXPREC_CHECK(p == Parse::ok || p == Parse::out_of_range, ValueError, kOp,
                  where(line, label_) << ": label '" << cell
                                      << "' is not a class id (an integer >= 0); map class names "
                                         "to 0, 1, 2, ... first");
    MIXPREC_CHECK(v >= 0, ValueError, kOp,
                  where(line, label_) << ": label '" << cell
                                      << "' is negative; class ids are integers >= 0");
    MIXPREC_CHECK(std::floor(v) == v, ValueError, kOp,
                  where(line, label_) << ": label '" << cell
                                      << "' is not an integer; class ids are integers >= 0 (is "
                                         "this a regression target, or the wrong label column?)");
    MIXPREC_CHECK(v <= kMaxLabel, ValueError, kOp,
                  where(line, label_) << ": label '" << cell << "' is absurdly large for a class id");
    return static_cast<std::int64_t>(v);
  }

  double parse_value(std::string_view cell, std::int64_t line) const {
    double v = 0;
    const Parse p = parse_number(cell, v);
    MIXPREC_CHECK(p != Parse::empty, ValueError, kOp,
                  where(line, label_) << ": empty target cell; every row needs a value");
    MIXPREC_CHECK(p != Parse::not_number, ValueError, kOp,
                  where(line, label_) << ": target '" << cell
                                      << "' is not a number; a regression target must be numeric");
    MIXPREC_CHECK(p == Parse::ok, ValueError, kOp,
                  where(line, label_) << ": target '" << cell
                                      << "' is NaN, infinite or outside the f32 range; clean the "
                                         "data or drop the row");
    return v;
  }

  const std::string& path_;
  const CsvOptions& opts_;
  std::int64_t columns_ = 0;
  std::int64_t label_ = -1;
  std::vector<std::string> names_;
  std::vector<std::int64_t> features_;
};

}  // namespace

CsvDataset read_csv(const std::string& path, const CsvOptions& opts) {
  return CsvReader(path, opts).read();
}

void column_statistics(const Dataset& d, std::vector<float>& mean, std::vector<float>& stddev) {
  MIXPREC_CHECK(d.images.defined() && d.images.dim() == 2 && d.images.dtype() == DType::f32 &&
                  d.images.is_contiguous() && d.images.size(0) >= 1,
              ValueError, "column_statistics", "needs contiguous f32 images [N, F] with N >= 1");
  const float* x = d.images.data<float>();
  const std::int64_t n = d.images.size(0), f = d.images.size(1);
  // A column whose values are all equal gets its exact value as mean and stddev 0 (a computed
  // variance might come out as a tiny non-zero rounding residue).
  const auto fs = static_cast<std::size_t>(f);
  std::vector<double> sum(fs, 0.0), sq(fs, 0.0);
  std::vector<float> lo(x, x + fs), hi(x, x + fs);
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = x + r * f;
    for (std::size_t j = 0; j < fs; ++j) {
      sum[j] += row[j];
      lo[j] = std::min(lo[j], row[j]);
      hi[j] = std::max(hi[j], row[j]);
    }
  }
  for (std::size_t j = 0; j < fs; ++j) sum[j] /= static_cast<double>(n);  // now the mean
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = x + r * f;
    for (std::size_t j = 0; j < fs; ++j) {
      const double dev = row[j] - sum[j];
      sq[j] += dev * dev;
    }
  }
  mean.resize(fs);
  stddev.resize(fs);
  for (std::size_t j = 0; j < fs; ++j) {
    const bool constant = lo[j] == hi[j];
    mean[j] = constant ? lo[j] : static_cast<float>(sum[j]);
    stddev[j] = constant ? 0.0f : static_cast<float>(std::sqrt(sq[j] / static_cast<double>(n)));
  }
}

void standardize_with(Dataset& d, const std::vector<float>& mean, const std::vector<float>& stddev) {
  constexpr const char* op = "standardize_with";
  MIXPREC_CHECK(d.images.defined() && d.images.dim() == 2, ValueError, op,
                "images must be a [N, F] tensor"
                    << (d.images.defined() ? ", got " + to_string(d.images.shape()) : std::string()));
  MIXPREC_CHECK(d.images.dtype() == DType::f32 && d.images.is_contiguous(), ValueError, op,
                "images must be contiguous f32, got " << name(d.images.dtype())
                                                      << (d.images.is_contiguous() ? "" : " (strided)"));
  const std::int64_t n = d.images.size(0), f = d.images.size(1);
  MIXPREC_CHECK(static_cast<std::int64_t>(mean.size()) == f && static_cast<std::int64_t>(stddev.size()) == f,
                ValueError, op,
                "the data has " << f << " features but the statistics have " << mean.size()
                                << " means and " << stddev.size()
                                << " standard deviations; were they computed on another table?");
  for (std::size_t j = 0; j < mean.size(); ++j) {
    MIXPREC_CHECK(std::isfinite(mean[j]) && std::isfinite(stddev[j]) && stddev[j] >= 0, ValueError, op,
                  "feature " << j << " has mean " << mean[j] << " and stddev " << stddev[j]
                             << "; need a finite mean and a finite stddev >= 0");
  }
  float* x = d.images.data<float>();
  for (std::int64_t r = 0; r < n; ++r) {
    float* row = x + r * f;
    for (std::int64_t j = 0; j < f; ++j) {
      const auto js = static_cast<std::size_t>(j);
      if (stddev[js] == 0.0f) {
        row[j] = 0.0f;
        continue;
      }
      const double z = (static_cast<double>(row[j]) - mean[js]) / stddev[js];
      row[j] = static_cast<float>(z);
      MIXPREC_CHECK(std::isfinite(row[j]), ValueError, op,
                    "sample " << r << " feature " << j << " standardises to " << row[j] << " (mean "
                              << mean[js] << ", stddev " << stddev[js]
                              << "): the value is far outside the range the statistics came from");
    }
  }
  d.images.bump_version();
}

}  // namespace mixprec::data
