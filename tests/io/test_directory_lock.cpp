// DirectoryLock: a second holder is refused with the first one named; the lock goes with its
// owner (destructor, or the process ending: kill -9 included), and listings ignore its file.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/directory_lock.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/lock_" + name + "_" + std::to_string(::getpid());
  fs::remove_all(dir);
  return dir;
}

// Runs `fn` in a child process; returns its exit status (fn's result: 0 ok).
template <class Fn>
int in_child(Fn fn) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(DirectoryLock, ASecondProcessIsRefusedNamingTheHolder) {
  const std::string dir = fresh_dir("second");
  DirectoryLock lock(dir, "mixprec train");
  EXPECT_TRUE(fs::exists(dir + "/" + kDirectoryLockName));
  const int status = in_child([&] {
    try {
      DirectoryLock again(dir, "mixprec train");
      return 1;  // taken twice
    } catch (const ValueError& e) {
      const std::string what = e.what();
      const bool named = what.find("'" + dir + "' is in use by mixprec train (pid " +
                                   std::to_string(::getppid())) != std::string::npos &&
                         what.find("choose another --checkpoint-dir") != std::string::npos;
      return named ? 0 : 2;
    }
  });
  EXPECT_EQ(status, 0);
}

TEST(DirectoryLock, IsReleasedByItsOwnerAndByAProcessThatDies) {
  const std::string dir = fresh_dir("release");
  { DirectoryLock lock(dir, "first"); }
  EXPECT_NO_THROW(DirectoryLock(dir, "second"));

  // A holder killed with SIGKILL leaves no stale lock.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    DirectoryLock held(dir, "victim");
    char c = 1;
    [[maybe_unused]] const ssize_t n = ::write(ready[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_THROW(DirectoryLock(dir, "while the victim lives"), ValueError);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_NO_THROW(DirectoryLock(dir, "after the victim"));
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(DirectoryLock, ItsFileIsNotTakenForAnIncompleteCheckpoint) {
  const std::string dir = fresh_dir("listing");
  DirectoryLock lock(dir, "mixprec train");
  try {
    resolve_checkpoint(dir);
    FAIL() << "resolved an empty directory";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no complete checkpoint"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec::io
