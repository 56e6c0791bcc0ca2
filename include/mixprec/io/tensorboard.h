#pragma once
/// TensorBoard event files, written without TensorFlow or protobuf: TFRecord framing (length,
/// masked CRC-32C of the length, payload, masked CRC-32C of the payload) around hand-encoded
/// `Event` protocol buffers (tensorflow/core/util/event.proto) carrying `Summary` values:
/// scalars (simple_value), histograms (HistogramProto) and text (a string tensor for the text
/// plugin). The real `tensorboard` package reads them (tests/python/tensorboard_check.py).
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mixprec::io {

/// A histogram as TensorBoard's HistogramProto holds it: bucket i counts the values in
/// (bucket_limit[i-1], bucket_limit[i]] (the first from -infinity).
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;
  std::vector<double> bucket;

  /// Buckets of `width` covering [lo, hi] (their right edges lo + width, lo + 2 width, ...,
  /// and a last one up to +infinity for values above hi; values at or below lo fall in the
  /// first). Non-finite values are left out. ValueError unless lo < hi and width > 0.
  static Histogram of(std::span<const double> values, double lo, double hi, double width);
};

/// One event file in a directory TensorBoard watches. Records are buffered and written by
/// flush() (and the destructor); a crash loses at most the unflushed ones, and TensorBoard reads
/// a file up to its last complete record.
class TensorBoardWriter {
 public:
  /// Creates dir (and its parents) and a new file "events.out.tfevents.<seconds>.<host>.<pid>"
  /// in it, and writes the file-version event. ValueError naming the directory and the reason
  /// (e.g. "Permission denied") when it cannot; nothing is left behind then.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  /// A scalar (stored as f32, TensorBoard's simple_value) under tag at step.
  void add_scalar(const std::string& tag, double value, std::int64_t step);
  /// A histogram under tag at step.
  void add_histogram(const std::string& tag, const Histogram& histogram, std::int64_t step);
  /// A text (Markdown) under tag at step, for TensorBoard's text plugin.
  void add_text(const std::string& tag, const std::string& text, std::int64_t step);
  /// Writes the buffered records and flushes the file; ValueError naming the file and the
  /// reason (e.g. "No space left on device") on failure.
  void flush();
  /// The event file's path.
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string pending_;
};

/// The payloads of a TFRecord stream, every length and payload checksum verified; ValueError
/// naming the byte offset of a damaged or truncated record.
std::vector<std::string> read_tfrecords(std::string_view bytes);

}  // namespace mixprec::io
