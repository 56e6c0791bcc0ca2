// IDX reading: correct values from raw, gzip (stored) and gzip (deflate-compressed) files; every
// kind of broken file throws a ValueError naming the file and the problem; Fashion-MNIST loading
// (normalisation, limit, count and label checks) on small fake files and, when Debian's
// dataset-fashion-mnist is installed, on the real data.
//
// The test binary does not link zlib (only the library does, privately), so gzip files are
// written here by hand: a gzip member of "stored" deflate blocks is a few lines, and a real
// deflate-compressed fixture (from Python's gzip.compress) covers the inflate path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/expect_error.h"
#include "mixprec/core/error.h"
#include "mixprec/data/idx.h"

namespace mixprec::data {
namespace {

using Bytes = std::vector<std::uint8_t>;
namespace fs = std::filesystem;

void put_be32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}
void put_le32(Bytes& out, std::uint32_t v) {
  for (int shift = 0; shift <= 24; shift += 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

Bytes images_file(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, const Bytes& pixels,
                  std::uint32_t magic = 0x00000803) {
  Bytes out;
  put_be32(out, magic);
  put_be32(out, count);
  put_be32(out, rows);
  put_be32(out, cols);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

Bytes labels_file(const Bytes& labels, std::uint32_t magic = 0x00000801) {
  Bytes out;
  put_be32(out, magic);
  put_be32(out, static_cast<std::uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

std::uint32_t crc32(const Bytes& data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const std::uint8_t byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// RFC 1952 gzip member holding `data` in RFC 1951 stored (uncompressed) blocks.
Bytes gzip_stored(const Bytes& data) {
  Bytes out = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff};
  std::size_t pos = 0;
  do {
    const std::size_t len = std::min<std::size_t>(data.size() - pos, 65535);
    const bool final = pos + len == data.size();
    out.push_back(final ? 1 : 0);  // BFINAL, BTYPE = 00 (stored)
    out.push_back(static_cast<std::uint8_t>(len));
    out.push_back(static_cast<std::uint8_t>(len >> 8));
    out.push_back(static_cast<std::uint8_t>(~len));
    out.push_back(static_cast<std::uint8_t>(~len >> 8));
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(pos),
               data.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
  } while (pos < data.size());
  put_le32(out, crc32(data));
  put_le32(out, static_cast<std::uint32_t>(data.size()));
  return out;
}

// Python: gzip.compress(images_file(2, 3, 4, [(j * 37) % 256 for j in range(24)]), 9, mtime=0);
// fixed-Huffman deflate, so reading it exercises real inflation.
const Bytes kCompressedImages = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x63, 0x60, 0xe0, 0x60, 0x66,
    0x60, 0x60, 0x60, 0x02, 0x62, 0x10, 0xcd, 0xc2, 0xa0, 0xea, 0x95, 0x3f, 0x65, 0xe7, 0x3d,
    0x66, 0x0d, 0xdf, 0xa2, 0xe9, 0x7b, 0x1e, 0xb2, 0x69, 0x07, 0x94, 0xce, 0xda, 0xff, 0x84,
    0x53, 0x2f, 0x18, 0x00, 0xb3, 0x46, 0x3d, 0xd8, 0x28, 0x00, 0x00, 0x00};

Bytes pattern(std::size_t n, std::size_t mult = 37) {
  Bytes out(n);
  for (std::size_t j = 0; j < n; ++j) out[j] = static_cast<std::uint8_t>((j * mult) % 256);
  return out;
}

using testing::expect_value_error;

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("mixprec_idx_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const Bytes& bytes) const {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                             static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
  fs::path dir_;
};

using IdxReader = IdxTest;

TEST_F(IdxReader, ReadsRawImagesAndLabels) {
  const Bytes pixels = pattern(3 * 2 * 5);
  const IdxImages images = read_idx_images(write("img", images_file(3, 2, 5, pixels)));
  EXPECT_EQ(images.count, 3);
  EXPECT_EQ(images.rows, 2);
  EXPECT_EQ(images.cols, 5);
  EXPECT_EQ(images.pixels, pixels);
  const Bytes labels = {3, 0, 9, 255};
  EXPECT_EQ(read_idx_labels(write("lab", labels_file(labels))).labels, labels);
}

TEST_F(IdxReader, ReadsGzipStoredBlocksAcrossChunks) {
  // 70000 pixels need two stored blocks; an empty labels file is a valid IDX file.
  const Bytes pixels = pattern(7 * 100 * 100, 101);
  const IdxImages images = read_idx_images(write("img.gz", gzip_stored(images_file(7, 100, 100, pixels))));
  EXPECT_EQ(images.count, 7);
  EXPECT_EQ(images.pixels, pixels);
  EXPECT_TRUE(read_idx_labels(write("lab.gz", gzip_stored(labels_file({})))).labels.empty());
}

TEST_F(IdxReader, ReadsDeflateCompressedGzip) {
  const IdxImages images = read_idx_images(write("img.gz", kCompressedImages));
  EXPECT_EQ(images.count, 2);
  EXPECT_EQ(images.rows, 3);
  EXPECT_EQ(images.cols, 4);
  EXPECT_EQ(images.pixels, pattern(24));
}

using IdxErrors = IdxTest;

TEST_F(IdxErrors, MissingFileNamesItAndSaysHowToGetIt) {
  const std::string path = (dir_ / "train-images-idx3-ubyte.gz").string();
  expect_value_error([&] { read_idx_images(path); },
                     {"read_idx", path, "missing", "sudo apt-get install dataset-fashion-mnist", "--data-dir"});
  expect_value_error([&] { read_idx_labels(path); }, {path, "missing"});
  expect_value_error([&] { read_idx_labels(dir_.string()); }, {dir_.string(), "directory"});
}

TEST_F(IdxErrors, WrongMagicShowsFoundAndExpected) {
  const std::string labels = write("labels", labels_file({1, 2}));
  expect_value_error([&] { read_idx_images(labels); },
                     {labels, "wrong magic number 0x00000801", "expected 0x00000803", "swapped"});
  const std::string images = write("images.gz", gzip_stored(images_file(1, 1, 1, {7})));
  expect_value_error([&] { read_idx_labels(images); },
                     {images, "wrong magic number 0x00000803", "expected 0x00000801"});
  const std::string text = write("text", Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!', '!', '!', '!'});
  expect_value_error([&] { read_idx_images(text); }, {text, "wrong magic number 0x68656C6C", "not an IDX file"});
  const std::string floats = write("floats", images_file(1, 1, 1, {0, 0, 0, 0}, 0x00000D03));
  expect_value_error([&] { read_idx_images(floats); },
                     {floats, "wrong magic number 0x00000D03", "element type 0D with 3 dimensions"});
}

TEST_F(IdxErrors, AbsurdDimensions) {
  const std::string zero_rows = write("a", images_file(1, 0, 28, {}));
  expect_value_error([&] { read_idx_images(zero_rows); }, {zero_rows, "absurd header", "0 rows x 28 columns"});
  const std::string huge_cols = write("b", images_file(1, 28, 4097, {}));
  expect_value_error([&] { read_idx_images(huge_cols); }, {huge_cols, "absurd header", "28 rows x 4097 columns"});
  const std::string huge_count = write("c", images_file(10'000'001, 28, 28, {}));
  expect_value_error([&] { read_idx_images(huge_count); }, {huge_count, "absurd header", "10000001 images"});
  Bytes labels;
  put_be32(labels, 0x801);
  put_be32(labels, 0xFFFFFFFFu);
  const std::string huge_labels = write("d", labels);
  expect_value_error([&] { read_idx_labels(huge_labels); }, {huge_labels, "absurd header", "4294967295 labels"});
}

// A header claiming 2^40 pixels (each dimension within its own limit) is refused from the header
// alone, raw or gzip, before any data is read or allocated.
TEST_F(IdxErrors, HeaderClaimingTerabytesIsRefusedBeforeReading) {
  const Bytes header = images_file(1u << 20, 1024, 1024, pattern(64));
  const std::string raw = write("tera", header);
  expect_value_error([&] { read_idx_images(raw); },
                     {raw, "absurd header", "1048576 images of 1024x1024", "1099511627776 pixel bytes"});
  const std::string gz = write("tera.gz", gzip_stored(header));
  expect_value_error([&] { read_idx_images(gz); }, {gz, "absurd header", "1099511627776 pixel bytes"});
  // Under the cap, but far more than an uncompressed file holds: its size says so up front.
  const std::string big = write("big", images_file(1'000'000, 28, 28, pattern(64)));
  expect_value_error([&] { read_idx_images(big); },
                     {big, "truncated", "expected 784000000 data bytes, got 64"});
}

TEST_F(IdxErrors, TruncatedDataAndHeader) {
  const Bytes full = images_file(3, 2, 5, pattern(30));
  const Bytes cut(full.begin(), full.end() - 10);
  const std::string raw = write("raw", cut);
  expect_value_error([&] { read_idx_images(raw); }, {raw, "truncated", "expected 30 data bytes, got 20"});
  // A complete gzip stream whose content is short: the same message.
  const std::string gz = write("short.gz", gzip_stored(cut));
  expect_value_error([&] { read_idx_images(gz); }, {gz, "truncated", "expected 30 data bytes, got 20"});
  // A gzip stream cut off in the middle (no trailer): zlib's "unexpected end of file".
  const Bytes whole = gzip_stored(full);
  const std::string cut_gz = write("cut.gz", Bytes(whole.begin(), whole.end() - 20));
  expect_value_error([&] { read_idx_images(cut_gz); }, {cut_gz, "truncated"});
  const std::string header = write("header", Bytes{0, 0, 8, 3, 0, 0});
  expect_value_error([&] { read_idx_images(header); }, {header, "truncated", "16-byte", "got 6 bytes"});
  const std::string empty = write("empty", {});
  expect_value_error([&] { read_idx_labels(empty); }, {empty, "empty"});
}

TEST_F(IdxErrors, CorruptGzip) {
  Bytes bad_crc = gzip_stored(labels_file({1, 2, 3}));
  bad_crc[bad_crc.size() - 8] ^= 0xFF;  // first CRC byte of the trailer
  const std::string crc_path = write("crc.gz", bad_crc);
  expect_value_error([&] { read_idx_labels(crc_path); }, {crc_path, "corrupt gzip", "zlib"});
  Bytes bad_method = kCompressedImages;
  bad_method[2] = 0x07;  // compression method other than deflate
  const std::string method_path = write("method.gz", bad_method);
  expect_value_error([&] { read_idx_images(method_path); }, {method_path, "corrupt gzip", "zlib"});
  Bytes bad_block = kCompressedImages;
  bad_block[10] |= 0x06;  // BTYPE = 11: a reserved (invalid) deflate block type
  const std::string block_path = write("block.gz", bad_block);
  expect_value_error([&] { read_idx_images(block_path); }, {block_path, "corrupt gzip", "zlib"});
}

TEST_F(IdxErrors, TrailingBytesAreAnError) {
  Bytes labels = labels_file({1, 2, 3});
  labels.push_back(4);
  labels.push_back(5);
  const std::string raw = write("raw", labels);
  expect_value_error([&] { read_idx_labels(raw); }, {raw, "2 unexpected bytes after the 3 data bytes"});
  const std::string gz = write("gz", gzip_stored(labels));
  expect_value_error([&] { read_idx_labels(gz); }, {gz, "2 unexpected bytes"});
}

class IdxFashionMnistFake : public IdxTest {
 protected:
  void write_split(const std::string& split, std::uint32_t n_images, const Bytes& labels, bool gzip = true) {
    const Bytes images = images_file(n_images, 28, 28, pattern(std::size_t{n_images} * 784, 1));
    images_path_ = write(split + "-images-idx3-ubyte" + (gzip ? ".gz" : ""), gzip ? gzip_stored(images) : images);
    const Bytes lab = labels_file(labels);
    labels_path_ = write(split + "-labels-idx1-ubyte" + (gzip ? ".gz" : ""), gzip ? gzip_stored(lab) : lab);
  }
  std::string images_path_, labels_path_;
};

TEST_F(IdxFashionMnistFake, NormalisesPixelsAndKeepsLabels) {
  write_split("train", 3, {4, 0, 9});
  const Dataset all = load_fashion_mnist(dir_.string(), /*train=*/true);
  ASSERT_EQ(all.images.shape(), (Shape{3, 784}));
  EXPECT_EQ(all.images.dtype(), DType::f32);
  EXPECT_EQ(all.labels, (std::vector<std::int64_t>{4, 0, 9}));
  const std::vector<float> v = all.images.to_vector();
  for (std::size_t j = 0; j < v.size(); ++j) {
    const float expected = (static_cast<float>(j % 256) / 255.0f - 0.2860f) / 0.3530f;
    ASSERT_EQ(v[j], expected) << "pixel " << j;  // the same float expression: exact
  }
  EXPECT_NEAR(v[0], -0.8102f, 1e-4f);   // black
  EXPECT_NEAR(v[255], 2.0227f, 1e-4f);  // white
  const Dataset two = load_fashion_mnist(dir_.string(), true, 2);
  ASSERT_EQ(two.images.shape(), (Shape{2, 784}));
  EXPECT_EQ(two.labels, (std::vector<std::int64_t>{4, 0}));
  EXPECT_EQ(load_fashion_mnist(dir_.string(), true, 100).labels.size(), 3u);  // limit > N: all
  expect_value_error([&] { load_fashion_mnist(dir_.string(), true, 0); }, {"limit", "got 0"});
}

TEST_F(IdxFashionMnistFake, FallsBackToUncompressedFilesAndPicksTheSplit) {
  write_split("t10k", 2, {1, 2}, /*gzip=*/false);
  EXPECT_EQ(load_fashion_mnist(dir_.string(), /*train=*/false).labels, (std::vector<std::int64_t>{1, 2}));
  const std::string missing = (dir_ / "train-images-idx3-ubyte.gz").string();
  expect_value_error([&] { load_fashion_mnist(dir_.string(), /*train=*/true); },
                     {missing, "missing", "dataset-fashion-mnist", "--data-dir"});
  const std::string nowhere = (dir_ / "nowhere").string();
  expect_value_error([&] { load_fashion_mnist(nowhere, true); }, {nowhere, "does not exist"});
}

TEST_F(IdxFashionMnistFake, CountMismatchNamesBothFiles) {
  write_split("train", 3, {1, 2});
  expect_value_error([&] { load_fashion_mnist(dir_.string(), true); },
                     {images_path_, labels_path_, "3 images", "2 labels"});
}

TEST_F(IdxFashionMnistFake, LabelOutOfRangeNamesFileAndIndex) {
  write_split("train", 3, {1, 10, 2});
  expect_value_error([&] { load_fashion_mnist(dir_.string(), true); },
                     {labels_path_, "label 10 at index 1", "0..9"});
}

TEST_F(IdxFashionMnistFake, RejectsImagesThatAreNot28x28) {
  write("train-images-idx3-ubyte.gz", gzip_stored(images_file(1, 2, 2, {0, 1, 2, 3})));
  const std::string images = (dir_ / "train-images-idx3-ubyte.gz").string();
  write("train-labels-idx1-ubyte.gz", gzip_stored(labels_file({1})));
  expect_value_error([&] { load_fashion_mnist(dir_.string(), true); }, {images, "28x28", "2x2"});
}

TEST(IdxFashionMnistReal, TrainSetHas60000ImagesAndValidLabels) {
  const std::string dir = kFashionMnistDefaultDir;
  if (!fs::is_directory(dir)) {
    GTEST_SKIP() << dir << " is absent: `sudo apt-get install dataset-fashion-mnist` to run this test";
  }
  const IdxImages images = read_idx_images(dir + "/train-images-idx3-ubyte.gz");
  EXPECT_EQ(images.count, 60000);
  EXPECT_EQ(images.rows, 28);
  EXPECT_EQ(images.cols, 28);
  EXPECT_EQ(images.pixels.size(), 60000u * 784u);
  const IdxLabels labels = read_idx_labels(dir + "/train-labels-idx1-ubyte.gz");
  ASSERT_EQ(labels.labels.size(), 60000u);
  std::array<int, 10> per_class{};
  for (const std::uint8_t l : labels.labels) {
    ASSERT_LT(l, 10);
    ++per_class[l];
  }
  for (const int c : per_class) EXPECT_EQ(c, 6000);  // Fashion-MNIST's train set is balanced
  // The normalisation constants are the train set's pixel mean and std: normalised pixels
  // must have mean ~0 and std ~1 (the constants are given to 4 digits, hence the tolerance).
  double sum = 0, sum_sq = 0;
  for (const std::uint8_t p : images.pixels) {
    const double x = (p / 255.0 - 0.2860) / 0.3530;
    sum += x;
    sum_sq += x * x;
  }
  const double n = static_cast<double>(images.pixels.size());
  EXPECT_NEAR(sum / n, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(sum_sq / n - (sum / n) * (sum / n)), 1.0, 1e-3);
  const Dataset test = load_fashion_mnist(dir, /*train=*/false);
  EXPECT_EQ(test.images.shape(), (Shape{10000, 784}));
  EXPECT_EQ(test.labels.size(), 10000u);
}

}  // namespace
}  // namespace mixprec::data
