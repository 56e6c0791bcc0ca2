// IDX reading through zlib's gz* interface, which inflates gzip files and passes other files
// through unchanged, so one code path serves both. The header is validated before the data is
// allocated, and the data buffer grows with what actually arrives, so a corrupt header claiming
// terabytes fails with "truncated" instead of an allocation failure.
#include "mixprec/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "mixprec/core/error.h"

namespace mixprec::data {
namespace {

constexpr const char* kOp = "read_idx";
constexpr std::uint32_t kImagesMagic = 0x00000803;  // u8 elements, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // u8 elements, 1 dimension
// gzread takes an unsigned length: read in bounded chunks.
constexpr std::size_t kChunk = std::size_t{16} << 20;

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

// What the user should do when a data file is not there.
std::string missing_hint() {
  return std::string("install Fashion-MNIST with `sudo apt-get install dataset-fashion-mnist` (it goes to ") +
         kFashionMnistDefaultDir + "), or pass --data-dir DIR naming a directory that holds the IDX files";
}

// An open gzip-or-raw file; every read checks zlib's error state, because gzread can return a
// partial count while recording an error (e.g. a CRC mismatch found at the end of the stream).
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    MIXPREC_CHECK(status.type() != std::filesystem::file_type::not_found, ValueError, kOp,
                  path << ": the file is missing (no such file). To get it, " << missing_hint());
    MIXPREC_CHECK(!ec, ValueError, kOp, path << ": cannot access the file (" << ec.message() << ")");
    MIXPREC_CHECK(!std::filesystem::is_directory(status), ValueError, kOp,
                  path << ": is a directory, not an IDX file");
    if (std::filesystem::is_regular_file(status)) {
      const auto size = std::filesystem::file_size(path, ec);
      if (!ec) file_size_ = static_cast<std::int64_t>(size);
    }
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    MIXPREC_CHECK(file_ != nullptr, ValueError, kOp,
                  path << ": cannot open the file ("
                       << (errno != 0 ? std::strerror(errno) : "zlib could not allocate its state")
                       << "); check its permissions");
    gzbuffer(file_, 256 * 1024);  // fewer system calls than the 8 KiB default
  }
  ~GzReader() { gzclose_r(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes into dst; fewer only at the end of the data.
  std::size_t read(void* dst, std::size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    std::size_t total = 0;
    while (total < n) {
      const auto want = static_cast<unsigned>(std::min(n - total, kChunk));
      const int got = gzread(file_, out + total, want);
      check_zlib();
      MIXPREC_CHECK(got >= 0, ValueError, kOp, path_ << ": read failed (" << std::strerror(errno) << ")");
      total += static_cast<std::size_t>(got);
      if (static_cast<unsigned>(got) < want) break;  // end of data
    }
    return total;
  }

  // Bytes left after `consumed` if the file is uncompressed and regular (its size is then known
  // before reading), else -1. Valid after the first read, when zlib has looked for a gzip header.
  std::int64_t raw_bytes_after(std::int64_t consumed) const {
    if (file_size_ < 0 || gzdirect(file_) != 1) return -1;
    return std::max<std::int64_t>(file_size_ - consumed, 0);
  }

  // Reads and discards the rest of the file; returns how many bytes there were.
  std::size_t skip_rest() {
    std::vector<unsigned char> sink(64 * 1024);
    std::size_t total = 0;
    for (std::size_t got; (got = read(sink.data(), sink.size())) > 0;) total += got;
    return total;
  }

 private:
  void check_zlib() {
    int errnum = Z_OK;
    std::string_view msg = gzerror(file_, &errnum);
    if (errnum == Z_OK) return;
    // zlib prefixes its message with the path, which ours already starts with.
    if (msg.starts_with(path_ + ": ")) msg.remove_prefix(path_.size() + 2);
    if (errnum == Z_BUF_ERROR) {  // zlib's "unexpected end of file": the gzip stream stops early
      MIXPREC_CHECK(false, ValueError, kOp,
                    path_ << ": the gzip stream is truncated (zlib: " << msg
                          << "); the file is incomplete: download or reinstall it again");
    }
    if (errnum == Z_ERRNO) {
      MIXPREC_CHECK(false, ValueError, kOp, path_ << ": read failed (" << std::strerror(errno) << ")");
    }
    MIXPREC_CHECK(false, ValueError, kOp,
                  path_ << ": corrupt gzip data (zlib error " << errnum << ": " << msg
                        << "); the file is damaged: download or reinstall it again");
  }

  std::string path_;
  gzFile file_ = nullptr;
  std::int64_t file_size_ = -1;
};

std::uint32_t big_endian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// Reads the magic and `dims` dimension sizes, checking the magic against `expected`.
std::vector<std::int64_t> read_header(GzReader& in, const std::string& path, std::uint32_t expected,
                                      int dims, std::string_view kind) {
  std::array<unsigned char, 16> header{};
  const std::size_t want = 4 * (1 + static_cast<std::size_t>(dims));
  const std::size_t got = in.read(header.data(), want);
  MIXPREC_CHECK(got >= 4, ValueError, kOp,
                path << ": truncated: expected a " << want << "-byte IDX " << kind << " header, got "
                     << got << " bytes" << (got == 0 ? " (the file is empty)" : ""));
  const std::uint32_t magic = big_endian32(header.data());
  if (magic != expected) {
    std::string hint;
    if (magic == kLabelsMagic || magic == kImagesMagic) {
      hint = std::string(" (that is an IDX ") + (magic == kLabelsMagic ? "labels" : "images") +
             " file: are the images and labels files swapped?)";
    } else if ((magic & 0xFFFF0000u) != 0) {
      hint = " (not an IDX file: IDX files start with the bytes 00 00 08 0N)";
    } else {
      hint = " (an IDX file of element type " + hex32(magic >> 8).substr(8) + " with " +
             std::to_string(magic & 0xFFu) + " dimensions; only unsigned bytes, type 08, are supported)";
    }
    MIXPREC_CHECK(false, ValueError, kOp,
                  path << ": wrong magic number " << hex32(magic) << ", expected " << hex32(expected)
                       << " for an IDX " << kind << " file" << hint);
  }
  MIXPREC_CHECK(got == want, ValueError, kOp,
                path << ": truncated: expected a " << want << "-byte IDX " << kind << " header, got "
                     << got << " bytes");
  std::vector<std::int64_t> sizes;
  for (int d = 0; d < dims; ++d) {
    sizes.push_back(static_cast<std::int64_t>(big_endian32(header.data() + 4 * (1 + d))));
  }
  MIXPREC_CHECK(sizes[0] <= kIdxMaxCount, ValueError, kOp,
                path << ": absurd header: " << sizes[0] << " " << kind << " (at most " << kIdxMaxCount
                     << " accepted); the file is corrupt or not an IDX file");
  return sizes;
}

// Reads exactly `expected` data bytes and checks nothing follows them.
std::vector<std::uint8_t> read_data(GzReader& in, const std::string& path, std::int64_t expected,
                                    std::int64_t header_bytes, const std::string& what) {
  const auto n = static_cast<std::size_t>(expected);
  // An uncompressed file's size is known: compare it with the header before allocating.
  const std::int64_t raw = in.raw_bytes_after(header_bytes);
  MIXPREC_CHECK(raw < 0 || raw >= expected, ValueError, kOp,
                path << ": truncated: the header declares " << what << ", expected " << n
                     << " data bytes, got " << raw
                     << "; the file is incomplete: download or reinstall it again");
  std::vector<std::uint8_t> data;
  data.reserve(std::min(n, kChunk * 4));
  while (data.size() < n) {
    const std::size_t old = data.size();
    const std::size_t want = std::min(n - old, kChunk);
    data.resize(old + want);
    const std::size_t got = in.read(data.data() + old, want);
    data.resize(old + got);
    if (got < want) break;
  }
  MIXPREC_CHECK(data.size() == n, ValueError, kOp,
                path << ": truncated: the header declares " << what << ", expected " << n
                     << " data bytes, got " << data.size()
                     << "; the file is incomplete: download or reinstall it again");
  const std::size_t extra = in.skip_rest();
  MIXPREC_CHECK(extra == 0, ValueError, kOp,
                path << ": " << extra << " unexpected bytes after the " << n << " data bytes of " << what
                     << "; the header's count is wrong or the file is not what its name says");
  return data;
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  GzReader in(path);
  const std::vector<std::int64_t> sizes = read_header(in, path, kImagesMagic, 3, "images");
  IdxImages out;
  out.count = sizes[0];
  out.rows = sizes[1];
  out.cols = sizes[2];
  MIXPREC_CHECK(out.rows >= 1 && out.rows <= kIdxMaxSide && out.cols >= 1 && out.cols <= kIdxMaxSide,
                ValueError, kOp,
                path << ": absurd header: images of " << out.rows << " rows x " << out.cols
                     << " columns (each side must be in [1, " << kIdxMaxSide
                     << "]); the file is corrupt or not an IDX images file");
  const std::string what = std::to_string(out.count) + " images of " + std::to_string(out.rows) + "x" +
                           std::to_string(out.cols);
  const std::int64_t pixel_bytes = out.count * out.rows * out.cols;  // < 2^47: no overflow
  MIXPREC_CHECK(pixel_bytes <= kIdxMaxPixelBytes, ValueError, kOp,
                path << ": absurd header: " << what << " are " << pixel_bytes << " pixel bytes (at most "
                     << kIdxMaxPixelBytes << " accepted); the file is corrupt or not an IDX images file");
  out.pixels = read_data(in, path, pixel_bytes, 16, what);
  return out;
}

IdxLabels read_idx_labels(const std::string& path) {
  GzReader in(path);
  const std::vector<std::int64_t> sizes = read_header(in, path, kLabelsMagic, 1, "labels");
  IdxLabels out;
  out.labels = read_data(in, path, sizes[0], 8, std::to_string(sizes[0]) + " labels");
  return out;
}

namespace {

// dir/stem.gz if present, else dir/stem if present; a missing-file error naming both otherwise.
std::string find_split_file(const std::string& dir, const std::string& stem) {
  const std::filesystem::path base = std::filesystem::path(dir) / stem;
  const std::string gz = base.string() + ".gz";
  std::error_code ec;
  if (std::filesystem::exists(gz, ec)) return gz;
  if (std::filesystem::exists(base, ec)) return base.string();
  const bool dir_exists = std::filesystem::is_directory(dir, ec);
  MIXPREC_CHECK(false, ValueError, kOp,
                gz << ": the file is missing (nor is there an uncompressed " << base.string() << ")"
                   << (dir_exists ? "" : "; the directory " + dir + " does not exist either")
                   << ". To get it, " << missing_hint());
  return {};
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, bool train, std::int64_t limit) {
  constexpr const char* op = "load_fashion_mnist";
  MIXPREC_CHECK(limit == -1 || limit >= 1, ValueError, op,
                "limit must be -1 (every sample) or at least 1, got " << limit);
  const std::string split = train ? "train" : "t10k";
  const std::string images_path = find_split_file(dir, split + "-images-idx3-ubyte");
  const std::string labels_path = find_split_file(dir, split + "-labels-idx1-ubyte");
  IdxImages images = read_idx_images(images_path);
  const IdxLabels labels = read_idx_labels(labels_path);
  MIXPREC_CHECK(images.rows == 28 && images.cols == 28, ValueError, op,
                images_path << ": Fashion-MNIST images are 28x28, this file holds " << images.rows << "x"
                            << images.cols << " images");
  const auto label_count = static_cast<std::int64_t>(labels.labels.size());
  MIXPREC_CHECK(images.count == label_count, ValueError, op,
                images_path << " holds " << images.count << " images but " << labels_path << " holds "
                            << label_count << " labels; the counts must match (mixed-up splits?)");
  for (std::size_t i = 0; i < labels.labels.size(); ++i) {
    MIXPREC_CHECK(labels.labels[i] < 10, ValueError, op,
                  labels_path << ": label " << int{labels.labels[i]} << " at index " << i
                              << " is not a Fashion-MNIST class (expected 0..9)");
  }

  const std::int64_t n = limit == -1 ? images.count : std::min(limit, images.count);
  constexpr std::int64_t kPixels = 28 * 28;
  Dataset out;
  out.images = Tensor::empty({n, kPixels}, DType::f32, MemoryCategory::workspace, Device{});
  // A 256-entry table gives each byte value the exact same float the formula would.
  std::array<float, 256> table{};
  for (int v = 0; v < 256; ++v) {
    table[static_cast<std::size_t>(v)] =
        (static_cast<float>(v) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
  float* dst = out.images.data<float>();
  const std::size_t total = static_cast<std::size_t>(n * kPixels);
  for (std::size_t i = 0; i < total; ++i) dst[i] = table[images.pixels[i]];
  out.labels.assign(labels.labels.begin(), labels.labels.begin() + n);
  return out;
}

IdxDataset load_idx_dataset(const std::string& dir, bool train, std::int64_t limit) {
  constexpr const char* op = "load_idx";
  MIXPREC_CHECK(limit == -1 || limit >= 1, ValueError, op,
                "limit must be -1 (every sample) or at least 1, got " << limit);
  const std::string split = train ? "train" : "t10k";
  const std::string images_path = find_split_file(dir, split + "-images-idx3-ubyte");
  const std::string labels_path = find_split_file(dir, split + "-labels-idx1-ubyte");
  const IdxImages images = read_idx_images(images_path);
  const IdxLabels labels = read_idx_labels(labels_path);
  MIXPREC_CHECK(images.count == static_cast<std::int64_t>(labels.labels.size()), ValueError, op,
                images_path << " holds " << images.count << " images but " << labels_path << " holds "
                            << labels.labels.size() << " labels; the counts must match (mixed-up splits?)");
  const std::int64_t n = limit == -1 ? images.count : std::min(limit, images.count);
  IdxDataset out;
  out.rows = images.rows;
  out.cols = images.cols;
  const std::int64_t pixels = images.rows * images.cols;
  out.data.images = Tensor::empty({n, pixels}, DType::f32, MemoryCategory::workspace, Device{});
  float* dst = out.data.images.data<float>();
  const auto total = static_cast<std::size_t>(n * pixels);
  for (std::size_t i = 0; i < total; ++i) dst[i] = static_cast<float>(images.pixels[i]) / 255.0f;
  out.data.labels.assign(labels.labels.begin(), labels.labels.begin() + n);
  return out;
}

}  // namespace mixprec::data
