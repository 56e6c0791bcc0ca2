// TensorBoard event files: TFRecord framing around hand-encoded protocol buffers. Only the
// fields we write are encoded; field numbers are those of tensorflow/core/util/event.proto,
// tensorflow/core/framework/summary.proto, tensor.proto and tensor_shape.proto.
#include "mixprec/io/tensorboard.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/crc32c.h"

namespace mixprec::io {
namespace {

constexpr const char* kOp = "tensorboard";

// ---- protocol-buffer wire format (https://protobuf.dev/programming-guides/encoding/) ----
enum WireType : unsigned { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, unsigned field, WireType type) { put_varint(out, (std::uint64_t{field} << 3) | type); }
template <class T>
void put_le(std::string& out, T bits) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}
void put_double(std::string& out, unsigned field, double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_le(out, bits);
}
void put_float(std::string& out, unsigned field, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_le(out, bits);
}
void put_int(std::string& out, unsigned field, std::int64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<std::uint64_t>(v));
}
void put_bytes(std::string& out, unsigned field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_packed_doubles(std::string& out, unsigned field, const std::vector<double>& values) {
  std::string body;
  for (const double v : values) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put_le(body, bits);
  }
  put_bytes(out, field, body);
}

// Event: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string), summary = 5.
std::string event(std::int64_t step, const std::string* summary, const char* file_version = nullptr) {
  const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string e;
  put_double(e, 1, wall);
  put_int(e, 2, step);
  if (file_version != nullptr) put_bytes(e, 3, file_version);
  if (summary != nullptr) put_bytes(e, 5, *summary);
  return e;
}

// Summary: repeated Value value = 1. Value: tag = 1, simple_value = 2, histo = 5, tensor = 8,
// metadata = 9.
std::string summary_of(const std::string& value) {
  std::string s;
  put_bytes(s, 1, value);
  return s;
}

std::string record(std::string_view payload) {
  std::string out, length;
  put_le(length, static_cast<std::uint64_t>(payload.size()));
  out.append(length);
  put_le(out, masked_crc32c(length));
  out.append(payload);
  put_le(out, masked_crc32c(payload));
  return out;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

Histogram Histogram::of(std::span<const double> values, double lo, double hi, double width) {
  MIXPREC_CHECK(lo < hi && width > 0 && std::isfinite(lo) && std::isfinite(hi), ValueError, kOp,
                "a histogram needs lo < hi and width > 0, got [" << lo << ", " << hi << "] by " << width);
  Histogram h;
  const auto buckets = static_cast<std::size_t>(std::ceil((hi - lo) / width));
  for (std::size_t i = 1; i <= buckets; ++i) h.bucket_limit.push_back(lo + width * static_cast<double>(i));
  h.bucket_limit.push_back(std::numeric_limits<double>::max());  // the overflow bucket
  h.bucket.assign(h.bucket_limit.size(), 0.0);
  h.min = std::numeric_limits<double>::infinity();
  h.max = -std::numeric_limits<double>::infinity();
  for (const double v : values) {
    if (!std::isfinite(v)) continue;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
    std::size_t i = v <= lo ? 0 : static_cast<std::size_t>(std::ceil((v - lo) / width)) - 1;
    h.bucket[std::min(i, h.bucket.size() - 1)] += 1;
  }
  if (h.num == 0) h.min = h.max = 0;
  return h;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  MIXPREC_CHECK(!dir.empty(), ValueError, kOp, "--tensorboard needs a directory");
  try {
    make_directories(dir);
  } catch (const ValueError& e) {
    MIXPREC_CHECK(false, ValueError, kOp,
                  "cannot write TensorBoard events to '" << dir << "': " << e.what()
                                                         << "; choose a writable --tensorboard directory");
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  path_ = dir + "/events.out.tfevents." + std::to_string(seconds) + "." + host_name() + "." +
          std::to_string(static_cast<long long>(getpid()));
  file_ = std::fopen(path_.c_str(), "wbx");  // x: never append to another writer's file
  MIXPREC_CHECK(file_ != nullptr, ValueError, kOp,
                "cannot write TensorBoard events to '" << dir << "': " << std::strerror(errno)
                                                       << "; choose a writable --tensorboard directory");
  write_event(event(0, nullptr, "brain.Event:2"));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ == nullptr) return;
  try {
    flush();
  } catch (...) {
    // A destructor must not throw; flush() already reported failures to callers that asked.
  }
  std::fclose(file_);
}

void TensorBoardWriter::write_event(const std::string& e) {
  pending_ += record(e);
  if (pending_.size() >= (std::size_t{1} << 20)) flush();
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, std::int64_t step) {
  std::string v;
  put_bytes(v, 1, tag);
  put_float(v, 2, static_cast<float>(value));
  const std::string s = summary_of(v);
  write_event(event(step, &s));
}

void TensorBoardWriter::add_histogram(const std::string& tag, const Histogram& h, std::int64_t step) {
  // HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7.
  std::string histo;
  put_double(histo, 1, h.min);
  put_double(histo, 2, h.max);
  put_double(histo, 3, h.num);
  put_double(histo, 4, h.sum);
  put_double(histo, 5, h.sum_squares);
  put_packed_doubles(histo, 6, h.bucket_limit);
  put_packed_doubles(histo, 7, h.bucket);
  std::string v;
  put_bytes(v, 1, tag);
  put_bytes(v, 5, histo);
  const std::string s = summary_of(v);
  write_event(event(step, &s));
}

void TensorBoardWriter::add_text(const std::string& tag, const std::string& text, std::int64_t step) {
  // TensorProto: dtype 1 (DT_STRING = 7), tensor_shape 2 (a scalar: empty), string_val 8.
  std::string tensor;
  put_int(tensor, 1, 7);
  put_bytes(tensor, 2, "");
  put_bytes(tensor, 8, text);
  // SummaryMetadata: plugin_data 1 (PluginData: plugin_name 1).
  std::string plugin, metadata;
  put_bytes(plugin, 1, "text");
  put_bytes(metadata, 1, plugin);
  std::string v;
  put_bytes(v, 1, tag);
  put_bytes(v, 8, tensor);
  put_bytes(v, 9, metadata);
  const std::string s = summary_of(v);
  write_event(event(step, &s));
}

void TensorBoardWriter::flush() {
  if (!pending_.empty()) {
    const std::size_t written = std::fwrite(pending_.data(), 1, pending_.size(), file_);
    const int error = errno;
    MIXPREC_CHECK(written == pending_.size() && std::fflush(file_) == 0, ValueError, kOp,
                  "cannot write to '" << path_ << "': " << std::strerror(written == pending_.size() ? errno : error));
    pending_.clear();
  } else {
    MIXPREC_CHECK(std::fflush(file_) == 0, ValueError, kOp, "cannot write to '" << path_ << "': " << std::strerror(errno));
  }
}

std::vector<std::string> read_tfrecords(std::string_view bytes) {
  std::vector<std::string> out;
  std::size_t at = 0;
  const auto le = [&](std::size_t offset, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
    return v;
  };
  while (at < bytes.size()) {
    MIXPREC_CHECK(bytes.size() - at >= 12, ValueError, kOp, "truncated record header at byte " << at);
    const std::uint64_t length = le(at, 8);
    MIXPREC_CHECK(static_cast<std::uint32_t>(le(at + 8, 4)) == masked_crc32c(bytes.substr(at, 8)), ValueError, kOp,
                  "the length of the record at byte " << at << " fails its checksum");
    MIXPREC_CHECK(length <= bytes.size() - at - 12 && bytes.size() - at - 12 - length >= 4, ValueError, kOp,
                  "the record at byte " << at << " claims " << length << " bytes, beyond the end of the data");
    const std::string_view payload = bytes.substr(at + 12, static_cast<std::size_t>(length));
    MIXPREC_CHECK(static_cast<std::uint32_t>(le(at + 12 + length, 4)) == masked_crc32c(payload), ValueError, kOp,
                  "the record at byte " << at << " fails its checksum");
    out.emplace_back(payload);
    at += 16 + static_cast<std::size_t>(length);
  }
  return out;
}

}  // namespace mixprec::io
