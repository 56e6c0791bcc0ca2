// Atomic replacement by the classic write-temp / fsync / rename / fsync-directory sequence:
// rename(2) within one directory is atomic, so readers see the old file or the complete new one,
// and the two fsyncs make sure the new contents and the new name are both on disk before we
// report success (without the first, a crash can leave the new name pointing at an empty file).
#include "mixprec/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "io/posix_file.h"
#include "mixprec/core/error.h"

namespace mixprec::io {
namespace detail {
namespace {

[[noreturn]] void fail_write(const char* op, const std::string& path, int err) {
  throw ValueError(op, "cannot write '" + path + "': " + std::strerror(err));
}

}  // namespace

std::string parent_directory(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

void write_file_synced(const std::string& path, std::string_view bytes, const char* op,
                       const std::string& shown) {
  const std::string& name = shown.empty() ? path : shown;
  int err = 0;
  {
    Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
    if (fd.get() < 0) fail_write(op, name, errno);  // nothing was created
    const char* p = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0 && err == 0) {
      const ssize_t n = ::write(fd.get(), p, left);
      if (n < 0) {
        if (errno != EINTR) err = errno;
        continue;
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    if (err == 0 && ::fsync(fd.get()) != 0) err = errno;
    if (fd.close_checked() != 0 && err == 0) err = errno;
  }
  if (err != 0) {
    ::unlink(path.c_str());
    fail_write(op, name, err);
  }
}

void sync_directory(const std::string& dir, const char* op) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    throw ValueError(op, "cannot open directory '" + dir + "' to sync it: " + std::strerror(errno));
  }
  Fd guard(fd);
  if (::fsync(fd) != 0 && errno != EINVAL) {
    throw ValueError(op, "cannot sync directory '" + dir + "': " + std::strerror(errno));
  }
}

}  // namespace detail

void write_file_atomically(const std::string& path, std::string_view bytes) {
  constexpr const char* kOp = "write_file_atomically";
  MIXPREC_CHECK(!path.empty(), ValueError, kOp, "the path is empty");
  // The counter keeps concurrent writers in one process (threads) on distinct temporary files.
  static std::atomic<unsigned long long> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  detail::write_file_synced(tmp, bytes, kOp, path);  // removes tmp itself on failure
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw ValueError(kOp, "cannot write '" + path + "': " + std::strerror(err));
  }
  detail::sync_directory(detail::parent_directory(path), kOp);
}

std::string read_file(const std::string& path) {
  constexpr const char* kOp = "read_file";
  auto fail = [&](int err) -> void {
    throw ValueError(kOp, "cannot read '" + path + "': " + std::strerror(err));
  };
  detail::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail(errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(errno);
  if (S_ISDIR(st.st_mode)) fail(EISDIR);
  std::string out;
  // st_size is a hint (0 for pipes and /proc files): read until end of file regardless.
  if (S_ISREG(st.st_mode) && st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

void make_directories(const std::string& path) {
  constexpr const char* kOp = "make_directories";
  namespace fs = std::filesystem;
  MIXPREC_CHECK(!path.empty(), ValueError, kOp, "the path is empty");
  std::error_code ec;
  fs::create_directories(path, ec);
  if (!ec && fs::is_directory(path, ec)) return;
  // Name the component in the way, which the bare errno ("File exists", "Not a directory")
  // leaves the user to guess.
  fs::path prefix;
  for (const fs::path& part : fs::path(path)) {
    prefix /= part;
    std::error_code sec;
    const fs::file_status st = fs::status(prefix, sec);
    if (fs::exists(st) && !fs::is_directory(st)) {
      throw ValueError(kOp, "cannot create directory '" + path + "': '" + prefix.string() +
                                "' exists and is not a directory");
    }
  }
  throw ValueError(kOp, "cannot create directory '" + path + "': " +
                            (ec ? ec.message() : std::string("it does not exist afterwards")));
}

}  // namespace mixprec::io
