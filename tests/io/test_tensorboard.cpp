// TensorBoard event files: CRC-32C against published test vectors, TFRecord framing read back
// with every checksum verified (and a flipped byte refused), the histogram's buckets, and a
// directory that cannot be written refused with its name. The real `tensorboard` package reads
// the files in tests/cli/tensorboard.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/crc32c.h"
#include "mixprec/io/tensorboard.h"

namespace mixprec::io {
namespace {

TEST(Crc32c, MatchesPublishedVectors) {
  EXPECT_EQ(crc32c(""), 0x00000000u);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);    // RFC 3720, B.4
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);  // RFC 3720, B.4
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);  // RFC 3720, B.4
  const std::uint32_t c = crc32c("123456789");
  EXPECT_EQ(masked_crc32c("123456789"), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

TEST(Histogram, BucketsAreRightClosedWithAnOverflowBucket) {
  const std::vector<double> v{-5.0, -2.0, -1.5, 0.0, 0.5, 1.0, 3.0, 99.0, std::nan("")};
  const Histogram h = Histogram::of(v, -2.0, 2.0, 1.0);
  ASSERT_EQ(h.bucket_limit.size(), 5u);  // -1, 0, 1, 2, max
  EXPECT_EQ(h.bucket_limit[0], -1.0);
  EXPECT_EQ(h.bucket, (std::vector<double>{3, 1, 2, 0, 2}));  // (-inf,-1] (-1,0] (0,1] (1,2] (2,inf)
  EXPECT_EQ(h.num, 8.0);
  EXPECT_EQ(h.min, -5.0);
  EXPECT_EQ(h.max, 99.0);
  EXPECT_DOUBLE_EQ(h.sum, -5.0 - 2.0 - 1.5 + 0.5 + 1.0 + 3.0 + 99.0);
  EXPECT_THROW(Histogram::of(v, 1.0, 1.0, 1.0), ValueError);
  EXPECT_THROW(Histogram::of(v, 0.0, 1.0, 0.0), ValueError);
}

class TensorBoardFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("mixprec_tb_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TensorBoardFiles, RecordsReadBackWithTheirChecksums) {
  std::string path;
  {
    TensorBoardWriter w(dir_ + "/nested/run");
    path = w.path();
    EXPECT_NE(path.find("/events.out.tfevents."), std::string::npos) << path;
    w.add_scalar("train/loss", 0.25, 3);
    w.add_histogram("grad_log2/w", Histogram::of(std::vector<double>{-3.0, -2.5}, -4, 0, 1), 3);
    w.add_text("notes", "| a | b |", 0);
  }  // the destructor flushes
  const std::string bytes = read_file(path);
  const std::vector<std::string> records = read_tfrecords(bytes);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(records[1].find("train/loss"), std::string::npos);
  EXPECT_NE(records[2].find("grad_log2/w"), std::string::npos);
  EXPECT_NE(records[3].find("| a | b |"), std::string::npos);

  std::string damaged = bytes;
  damaged[bytes.size() - 7] ^= 0x10;  // inside the last payload
  EXPECT_THROW(read_tfrecords(damaged), ValueError);
  EXPECT_THROW(read_tfrecords(bytes.substr(0, bytes.size() - 2)), ValueError);  // truncated
}

TEST_F(TensorBoardFiles, AnUnwritableDirectoryIsRefusedNamingIt) {
  // A path below a regular file can never be a directory, for root too.
  std::filesystem::create_directories(dir_);
  write_file_atomically(dir_ + "/file", "x");
  try {
    TensorBoardWriter w(dir_ + "/file/tb");
    ADD_FAILURE() << "a directory below a file was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/file/tb"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--tensorboard"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec::io
