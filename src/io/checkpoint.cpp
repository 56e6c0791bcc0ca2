// Checkpoint directories. Crash safety comes from two facts: MANIFEST.json is written (and
// fsynced) after every other file, so a directory with a manifest is complete; and the finished
// directory enters under its final name by one rename. Replacing an existing checkpoint uses
// renameat2(RENAME_EXCHANGE), which swaps the two directories atomically, so the name never
// stops holding a complete checkpoint; the old one is then deleted from its temporary name.
#include "mixprec/io/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <system_error>

#include "io/posix_file.h"
#include "io/utc_time.h"
#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/sha256.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
constexpr const char* kTmpPrefix = ".tmp-";

[[noreturn]] void fail(const char* op, const std::string& path, const std::string& message) {
  throw ValueError(op, "checkpoint '" + path + "': " + message);
}

// Names used as one path component: no separators, no hidden or special entries.
void check_plain_name(const std::string& name, const char* what, const char* op) {
  MIXPREC_CHECK(!name.empty() && name.find('/') == std::string::npos && name.front() != '.' &&
                    name.find('\0') == std::string::npos,
                ValueError, op,
                what << " '" << name
                     << "' is not a plain file name (it must be non-empty, contain no '/' and "
                        "not start with '.')");
}

// Any entry named MANIFEST.json counts, a link included: loading then refuses it by name, which
// says more than "incomplete checkpoint" would.
bool has_manifest(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(dir / kCheckpointManifest, ec));
}

// A manifest lists a handful of files; anything near this size is not one of ours.
constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{1} << 20;

// The contents of the regular file `name` directly inside the open directory dir_fd. Links are
// never followed (O_NOFOLLOW), so a checkpoint cannot make us read outside its directory; FIFOs
// and devices are refused before any read (O_NONBLOCK keeps a FIFO from blocking the open); the
// size is checked against `expected_bytes` (or `max_bytes`) before anything is allocated.
std::string read_entry(int dir_fd, const std::string& name, const std::string& dir,
                       std::uint64_t max_bytes, const std::uint64_t* expected_bytes) {
  constexpr const char* kOp = "load_checkpoint";
  detail::Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ELOOP) {
      fail(kOp, dir, name + " is a symbolic link; a checkpoint holds only regular files and "
                            "loading never follows links");
    }
    if (err == ENOENT) fail(kOp, dir, name + " is missing (listed in " + kCheckpointManifest + ")");
    fail(kOp, dir, name + " is unreadable (" + std::strerror(err) + ")");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(kOp, dir, name + " is unreadable (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) {
    fail(kOp, dir, name + " is not a regular file (a checkpoint holds only regular files)");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (expected_bytes != nullptr && size != *expected_bytes) {
    fail(kOp, dir, name + " is damaged (size mismatch: " + std::to_string(size) +
                       " bytes, the manifest says " + std::to_string(*expected_bytes) + "; truncated?)");
  }
  if (size > max_bytes) {
    fail(kOp, dir, name + " is " + std::to_string(size) + " bytes, more than the " +
                       std::to_string(max_bytes) + " a " + name + " can be (not a mixprec checkpoint)");
  }
  std::string out;
  try {
    out.resize(static_cast<std::size_t>(size));
  } catch (const std::bad_alloc&) {  // a real file this large: say which, not "std::bad_alloc"
    fail(kOp, dir, name + " is " + std::to_string(size) + " bytes, more than this process can allocate");
  }
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(kOp, dir, name + " is unreadable (" + std::strerror(errno) + ")");
    if (n == 0) fail(kOp, dir, name + " shrank while being read (is another process writing it?)");
    done += static_cast<std::size_t>(n);
  }
  return out;
}

// The pid at the end of ".tmp-<anything>-<pid>", or -1 if the name has no such suffix.
long tmp_owner(const std::string& name) {
  if (name.rfind(kTmpPrefix, 0) != 0) return -1;
  const std::size_t dash = name.rfind('-');
  if (dash == std::string::npos || dash + 1 >= name.size() || dash < 4) return -1;
  long pid = 0;
  for (std::size_t i = dash + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || pid > 100'000'000) return -1;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

// Removes ".tmp-*-<pid>" directories left by processes that no longer run. Directories of live
// processes (including other saves of this one) are left alone; failures are ignored because
// the entries are garbage that never affects readers.
void remove_stale_temporaries(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = tmp_owner(it->path().filename().string());
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // still running
    std::error_code rec;
    fs::remove_all(it->path(), rec);
  }
}

// Swaps two existing directories atomically; false if the filesystem cannot (then errno is set).
bool exchange_directories(const std::string& a, const std::string& b) {
  return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0;
}

struct ManifestEntry {
  std::string name;
  std::string sha256;
  std::uint64_t bytes = 0;
};

std::vector<ManifestEntry> parse_manifest(const std::string& text, const std::string& path) {
  constexpr const char* kOp = "load_checkpoint";
  Json m;
  try {
    m = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(kOp, path, std::string(kCheckpointManifest) + " is damaged (not valid JSON: " + e.what() + ")");
  }
  auto bad = [&](const std::string& why) -> void {
    fail(kOp, path, std::string(kCheckpointManifest) + " is damaged or not a mixprec manifest (" + why + ")");
  };
  if (!m.is_object()) bad("not a JSON object");
  if (!m.contains("format") || m["format"] != kCheckpointFormat) {
    bad("\"format\" is not \"" + std::string(kCheckpointFormat) + "\"");
  }
  if (!m.contains("version") || !m["version"].is_number_integer()) bad("no integer \"version\"");
  const auto version = m["version"].get<std::int64_t>();
  if (version != kCheckpointVersion) {
    fail(kOp, path, "manifest version " + std::to_string(version) + " is not supported (this build reads version " +
                        std::to_string(kCheckpointVersion) + "; a newer mixprec wrote it?)");
  }
  if (!m.contains("files") || !m["files"].is_object()) bad("no \"files\" object");
  std::vector<ManifestEntry> out;
  for (const auto& [name, info] : m["files"].items()) {
    if (name.empty() || name.find('/') != std::string::npos || name.front() == '.') {
      // Refused by name, before any file is opened: "../x", "/etc/passwd" and "sub/x" would
      // reach outside the checkpoint directory or into places a save never writes.
      fail(kOp, path, std::string(kCheckpointManifest) + " names '" + name +
                          "', which is not a plain file name inside the checkpoint (no '/', not "
                          "starting with '.'); refusing to read outside the checkpoint directory");
    }
    if (!info.is_object() || !info.contains("sha256") || !info["sha256"].is_string() ||
        !info.contains("bytes") || !info["bytes"].is_number_unsigned()) {
      bad("entry of '" + name + "' lacks a string \"sha256\" or an unsigned \"bytes\"");
    }
    const auto sha = info["sha256"].get<std::string>();
    if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos) {
      bad("sha256 of '" + name + "' is not 64 lowercase hex digits");
    }
    out.push_back({name, sha, info["bytes"].get<std::uint64_t>()});
  }
  return out;
}

// Complete checkpoints directly inside dir, sorted by name; hidden entries are never listed.
std::vector<std::string> complete_children(const fs::path& dir, std::vector<std::string>* incomplete) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code dec;
    // A link to a directory is skipped: only the directory the user named may be a link.
    if (name.empty() || name.front() == '.' || it->is_symlink(dec) || !it->is_directory(dec)) continue;
    if (has_manifest(it->path())) {
      names.push_back(name);
    } else if (incomplete != nullptr) {
      incomplete->push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  if (incomplete != nullptr) std::sort(incomplete->begin(), incomplete->end());
  return names;
}

}  // namespace

std::string save_checkpoint(const std::string& checkpoint_dir, const std::string& name,
                            const CheckpointFiles& files) {
  constexpr const char* kOp = "save_checkpoint";
  MIXPREC_CHECK(!checkpoint_dir.empty(), ValueError, kOp, "the checkpoint directory is empty");
  check_plain_name(name, "checkpoint name", kOp);
  for (const auto& [file, unused] : files.files) {
    check_plain_name(file, "file name", kOp);
    MIXPREC_CHECK(file != kCheckpointManifest, ValueError, kOp,
                  "'" << kCheckpointManifest << "' is written by save_checkpoint itself; rename that file");
  }
  make_directories(checkpoint_dir);
  const fs::path dir(checkpoint_dir);
  remove_stale_temporaries(dir);

  const std::string final_path = (dir / name).string();
  const std::string tmp = (dir / (kTmpPrefix + name + "-" + std::to_string(::getpid()))).string();
  std::error_code ec;
  fs::remove_all(tmp, ec);  // a leftover of an earlier failed save of this process
  if (!fs::create_directory(tmp, ec) || ec) {
    fail(kOp, final_path, "cannot create temporary directory '" + tmp + "': " +
                              (ec ? ec.message() : std::string("it already exists")));
  }
  try {
    Json listed = Json::object();
    for (const auto& [file, bytes] : files.files) {
      detail::write_file_synced((fs::path(tmp) / file).string(), bytes, kOp);
      listed[file] = Json{{"sha256", sha256_hex(bytes)}, {"bytes", bytes.size()}};
    }
    const Json manifest = {{"format", kCheckpointFormat},
                           {"version", kCheckpointVersion},
                           {"files", std::move(listed)},
                           {"created", utc_timestamp_now()}};
    std::string manifest_text;
    try {
      manifest_text = manifest.dump(2) + "\n";
    } catch (const nlohmann::json::exception& e) {
      throw ValueError(kOp, "file names must be valid UTF-8 (" + std::string(e.what()) + ")");
    }
    detail::write_file_synced((fs::path(tmp) / kCheckpointManifest).string(), manifest_text, kOp);
    detail::sync_directory(tmp, kOp);

    const fs::file_status existing = fs::symlink_status(final_path, ec);
    if (fs::exists(existing)) {
      if (!fs::is_directory(existing)) {
        fail(kOp, final_path, "exists and is not a directory; move it away or choose another name");
      }
      if (!exchange_directories(tmp, final_path)) {
        // No atomic swap here (an old kernel or a filesystem without it): move the old one
        // aside first. A crash between the two renames leaves the name empty, with the new
        // checkpoint (complete) and the old one in hidden directories.
        const std::string aside = (dir / (std::string(kTmpPrefix) + "old-" + name + "-" + std::to_string(::getpid()))).string();
        fs::remove_all(aside, ec);
        if (::rename(final_path.c_str(), aside.c_str()) != 0) {
          fail(kOp, final_path, std::string("cannot replace the existing checkpoint: ") + std::strerror(errno));
        }
        if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
          const int err = errno;
          ::rename(aside.c_str(), final_path.c_str());  // put the old one back
          fail(kOp, final_path, std::string("cannot rename the new checkpoint into place: ") + std::strerror(err));
        }
        detail::sync_directory(checkpoint_dir, kOp);
        fs::remove_all(aside, ec);
        return final_path;
      }
    } else if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
      fail(kOp, final_path, std::string("cannot rename the new checkpoint into place: ") + std::strerror(errno));
    }
    detail::sync_directory(checkpoint_dir, kOp);
  } catch (...) {
    fs::remove_all(tmp, ec);  // holds the half-written new one, or the old one after a swap
    throw;
  }
  fs::remove_all(tmp, ec);  // after a swap: the replaced checkpoint
  return final_path;
}

std::string resolve_checkpoint(const std::string& path) {
  constexpr const char* kOp = "load_checkpoint";
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) fail(kOp, path, "no such file or directory");
  if (!fs::is_directory(st)) {
    fail(kOp, path, "is not a directory (a checkpoint is a directory holding " +
                        std::string(kCheckpointManifest) + ", or pass the directory of checkpoints)");
  }
  if (has_manifest(path)) return path;
  std::vector<std::string> incomplete;
  const std::vector<std::string> names = complete_children(path, &incomplete);
  if (!names.empty()) return (fs::path(path) / names.back()).string();

  bool has_files = false;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fec;
    // Dot files (the directory lock of a run writing here) are not checkpoint files.
    if (it->is_regular_file(fec) && it->path().filename().string().front() != '.') has_files = true;
  }
  if (has_files && incomplete.empty()) {
    fail(kOp, path, "is an incomplete checkpoint (no " + std::string(kCheckpointManifest) +
                        "; the save did not finish): use an older checkpoint");
  }
  std::string skipped;
  for (const std::string& n : incomplete) skipped += (skipped.empty() ? "" : ", ") + n;
  fail(kOp, path, "holds no complete checkpoint" +
                      (skipped.empty() ? std::string()
                                       : " (skipped incomplete ones without " +
                                             std::string(kCheckpointManifest) + ": " + skipped + ")"));
}

CheckpointFiles load_checkpoint(const std::string& path) {
  constexpr const char* kOp = "load_checkpoint";
  const std::string dir = resolve_checkpoint(path);
  // The directory the user named may be a link (followed); a checkpoint picked inside it may
  // not. Every file is then opened relative to this descriptor, so nothing is re-resolved.
  const int follow = dir == path ? 0 : O_NOFOLLOW;
  detail::Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | follow));
  if (dir_fd.get() < 0) fail(kOp, dir, std::string("cannot open the directory: ") + std::strerror(errno));
  std::string manifest_text = read_entry(dir_fd.get(), kCheckpointManifest, dir, kMaxManifestBytes, nullptr);
  CheckpointFiles out;
  for (const ManifestEntry& entry : parse_manifest(manifest_text, dir)) {
    std::string bytes = read_entry(dir_fd.get(), entry.name, dir, entry.bytes, &entry.bytes);
    const std::string sha = sha256_hex(bytes);
    if (sha != entry.sha256) {
      fail(kOp, dir, entry.name + " is damaged (sha256 mismatch: the file hashes to " + sha +
                         ", the manifest says " + entry.sha256 + ")");
    }
    out.files.emplace(entry.name, std::move(bytes));
  }
  out.manifest = std::move(manifest_text);
  return out;
}

std::vector<std::string> list_checkpoints(const std::string& checkpoint_dir) {
  std::vector<std::string> out;
  for (const std::string& name : complete_children(checkpoint_dir, nullptr)) {
    out.push_back((fs::path(checkpoint_dir) / name).string());
  }
  return out;
}

void prune_checkpoints(const std::string& checkpoint_dir, std::size_t keep_last) {
  constexpr const char* kOp = "prune_checkpoints";
  MIXPREC_CHECK(keep_last >= 1, ValueError, kOp,
                "keep_last must be at least 1 (deleting every checkpoint is never what you want)");
  const std::vector<std::string> all = list_checkpoints(checkpoint_dir);
  if (all.size() <= keep_last) return;
  for (std::size_t i = 0; i + keep_last < all.size(); ++i) {
    const std::string name = fs::path(all[i]).filename().string();
    const std::string doomed =
        (fs::path(checkpoint_dir) / (std::string(kTmpPrefix) + "prune-" + name + "-" + std::to_string(::getpid()))).string();
    if (::rename(all[i].c_str(), doomed.c_str()) != 0) {
      fail(kOp, all[i], std::string("cannot remove it: ") + std::strerror(errno));
    }
    std::error_code ec;
    fs::remove_all(doomed, ec);
    if (ec) fail(kOp, all[i], "cannot remove it: " + ec.message());
  }
  detail::sync_directory(checkpoint_dir, kOp);
}

}  // namespace mixprec::io
