// Atomic file writing: contents round-trip byte-exactly; replacing keeps no temporary files;
// every failure (missing directory, target is a directory, the disk "fills up" half-way through
// the write) throws a ValueError naming the path and leaves the old target intact and no
// temporary file behind. read_file and make_directories report what is wrong and where.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "io/io_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;
using test::entries;
using test::TempDir;
using test::with_user_permissions;

// Expects f() to throw ValueError whose message contains every one of parts.
template <class F>
void expect_value_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const ValueError& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(IoAtomicFile, WritesAndReadsBackExactBytes) {
  TempDir dir;
  std::string bytes("a\0b\xff\n", 5);
  for (int i = 0; i < 100000; ++i) bytes.push_back(static_cast<char>(i * 7));
  write_file_atomically(dir / "f.bin", bytes);
  EXPECT_EQ(read_file(dir / "f.bin"), bytes);
  write_file_atomically(dir / "empty", "");
  EXPECT_EQ(read_file(dir / "empty"), "");
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"empty", "f.bin"}));  // no temporaries
}

TEST(IoAtomicFile, ReplacesExistingFile) {
  TempDir dir;
  write_file_atomically(dir / "f", "old contents, longer than the new");
  write_file_atomically(dir / "f", "new");
  EXPECT_EQ(read_file(dir / "f"), "new");
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"f"});
}

TEST(IoAtomicFile, MissingDirectoryIsValueError) {
  TempDir dir;
  const std::string path = dir / "no/such/dir/f";
  expect_value_error([&] { write_file_atomically(path, "x"); },
                     {"write_file_atomically: cannot write '" + path + "'", "No such file or directory"});
  EXPECT_TRUE(entries(dir.path()).empty());
}

TEST(IoAtomicFile, TargetIsDirectoryLeavesItAndNoTemporary) {
  TempDir dir;
  fs::create_directory(dir / "target");
  write_file_atomically(dir / "target/inside", "keep");
  expect_value_error([&] { write_file_atomically(dir / "target", "x"); },
                     {"cannot write '" + (dir / "target") + "'"});
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"target"});
  EXPECT_EQ(read_file(dir / "target/inside"), "keep");
}

// A write that fails half-way (here: the file size limit, standing in for a full disk) must
// leave the previous contents and remove the partial temporary file.
TEST(IoAtomicFile, FailedWriteKeepsOldContents) {
  TempDir dir;
  write_file_atomically(dir / "f", "previous");
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  std::string message;
  try {
    write_file_atomically(dir / "f", std::string(100000, 'x'));
  } catch (const ValueError& e) {
    threw = true;
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_TRUE(threw);
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(read_file(dir / "f"), "previous");
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"f"});
}

TEST(IoAtomicFile, UnwritableDirectoryIsValueError) {
  TempDir dir;
  fs::create_directory(dir / "ro");
  fs::permissions(dir / "ro", test::kReadOnlyDirectory);
  with_user_permissions([&] {
    expect_value_error([&] { write_file_atomically(dir / "ro/f", "x"); }, {"Permission denied"});
  });
  EXPECT_TRUE(entries(dir / "ro").empty());
}

TEST(IoReadFile, MissingOrDirectoryIsValueError) {
  TempDir dir;
  expect_value_error([&] { (void)read_file(dir / "nope"); },
                     {"read_file: cannot read '" + (dir / "nope") + "'", "No such file or directory"});
  expect_value_error([&] { (void)read_file(dir.path().string()); }, {"Is a directory"});
}

TEST(IoMakeDirectories, CreatesNestedAndAcceptsExisting) {
  TempDir dir;
  make_directories(dir / "a/b/c");
  EXPECT_TRUE(fs::is_directory(dir / "a/b/c"));
  make_directories(dir / "a/b/c");  // exists: fine
  make_directories(dir / "a/b/c/");  // trailing slash: fine
}

TEST(IoMakeDirectories, FileInTheWayIsNamed) {
  TempDir dir;
  write_file_atomically(dir / "file", "x");
  expect_value_error([&] { make_directories(dir / "file/sub"); },
                     {"make_directories: cannot create directory '" + (dir / "file/sub") + "'",
                      "'" + (dir / "file") + "' exists and is not a directory"});
  expect_value_error([&] { make_directories(dir / "file"); }, {"exists and is not a directory"});
}

TEST(IoMakeDirectories, PermissionDeniedIsValueError) {
  TempDir dir;
  fs::create_directory(dir / "ro");
  fs::permissions(dir / "ro", test::kReadOnlyDirectory);
  with_user_permissions([&] { expect_value_error([&] { make_directories(dir / "ro/x/y"); }, {"Permission denied"}); });
  EXPECT_TRUE(entries(dir / "ro").empty());
}

}  // namespace
}  // namespace mixprec::io
