#pragma once
// Helpers for the io tests: a scratch directory removed on destruction, raw-bit tensors, and a
// way to check permission errors even when the tests run as root (CI does).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::io::test {

/// A fresh directory under the system temp directory, deleted with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("mixprec-io-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
    // Reachable by with_user_permissions' unprivileged child; writable by the owner only.
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                            std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                            std::filesystem::perms::others_exec);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  /// path() / name as a string.
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// r-x for everyone: no one but root may create entries in such a directory.
inline constexpr std::filesystem::perms kReadOnlyDirectory =
    std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec | std::filesystem::perms::group_read |
    std::filesystem::perms::group_exec | std::filesystem::perms::others_read | std::filesystem::perms::others_exec;

/// Runs check() with an ordinary user's permission checks. Root ignores file and directory
/// permissions, so under root (as in CI) check() runs in a forked child that has given up root for
/// uid/gid 65534 ('nobody'; setuid to a non-root uid drops every capability). The child reports
/// failed expectations through its exit status; their messages appear in the test's output. Paths
/// the check uses must be reachable by 'nobody' (TempDir is mode 0755 when created by root).
template <class Check>
void with_user_permissions(Check&& check) {
  if (::geteuid() != 0) {
    check();
    return;
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    try {
      check();
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the unprivileged child did not exit normally";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "in the child running as uid 65534: 1 = an expectation failed (see above), "
                                       "2 = it threw, 3 = it could not give up root";
}

/// Names of the entries of dir, sorted.
inline std::vector<std::string> entries(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// A contiguous tensor whose elements have exactly the given bit patterns (2 or 4 bytes each).
template <class Bits>
Tensor tensor_from_bits(const std::vector<Bits>& bits, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  if (!bits.empty()) std::memcpy(t.data_ptr(), bits.data(), bits.size() * sizeof(Bits));
  return t;
}

/// The raw bytes of a tensor's elements in row-major order.
inline std::string tensor_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

}  // namespace mixprec::io::test
