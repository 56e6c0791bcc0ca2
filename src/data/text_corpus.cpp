// Text corpus loading and the text split. Duplicates are found by (device, inode) of the file a
// name resolves to, which catches symlinks and hard links alike, whatever their names.
#include "mixprec/data/text_corpus.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "mixprec/core/error.h"

namespace mixprec::data {
namespace {

constexpr const char* kOp = "load_text_corpus";
namespace fs = std::filesystem;

using FileId = std::pair<dev_t, ino_t>;

std::string missing_hint(const std::string& path) {
  if (fs::path(path).lexically_normal() == fs::path(kFortunesDefaultDir)) {
    return "install the default corpus with `sudo apt-get install fortunes`, or pass a text file or a "
           "directory of text files instead";
  }
  return "pass an existing text file or a directory of text files";
}

// Appends the whole file to out. Read errors name the file; the size is not trusted (a file may
// grow or shrink while it is read), reading goes on to the end.
void append_file(const std::string& path, std::vector<std::uint8_t>& out) {
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  MIXPREC_CHECK(f != nullptr, ValueError, kOp,
                path << ": cannot open the file (" << std::strerror(errno) << "); check its permissions");
  std::uint8_t buf[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + got);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  MIXPREC_CHECK(!failed, ValueError, kOp, path << ": read failed (" << std::strerror(err) << ")");
}

class Loader {
 public:
  TextCorpus corpus;

  void add_path(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      const int err = errno;
      MIXPREC_CHECK(err != ENOENT && err != ENOTDIR, ValueError, kOp,
                    path << ": no such file or directory; " << missing_hint(path));
      MIXPREC_CHECK(false, ValueError, kOp, path << ": cannot access it (" << std::strerror(err) << ")");
    }
    if (S_ISDIR(st.st_mode)) {
      add_directory(path);
    } else {
      MIXPREC_CHECK(S_ISREG(st.st_mode), ValueError, kOp,
                    path << ": is neither a regular file nor a directory; pass a text file or a directory");
      add_file(path, st);
    }
  }

 private:
  std::set<FileId> seen_;

  // Returns whether the file was new (and so was read).
  bool add_file(const std::string& path, const struct stat& st) {
    if (!seen_.insert({st.st_dev, st.st_ino}).second) return false;
    append_file(path, corpus.bytes);
    corpus.files.push_back(path);
    return true;
  }

  void add_directory(const std::string& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    MIXPREC_CHECK(!ec, ValueError, kOp, dir << ": cannot list the directory (" << ec.message() << ")");
    std::sort(names.begin(), names.end());
    std::size_t used = 0;
    for (const std::string& name : names) {
      if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".dat") == 0) continue;
      const std::string path = (fs::path(dir) / name).string();
      struct stat st {};
      // stat follows symlinks: a dangling link or a link to a directory is not a usable file.
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (add_file(path, st)) ++used;
    }
    MIXPREC_CHECK(used > 0, ValueError, kOp,
                  dir << ": the directory holds no usable text file (regular files not ending in .dat, "
                         "not links to files already read); put text files in it or pass the files themselves");
  }
};

}  // namespace

TextCorpus load_text_corpus(const std::vector<std::string>& paths) {
  MIXPREC_CHECK(
      !paths.empty(), ValueError, kOp,
      "no path given; pass at least one text file or directory (the default corpus is " << kFortunesDefaultDir << ")");
  Loader loader;
  for (const std::string& path : paths) loader.add_path(path);
  MIXPREC_CHECK(!loader.corpus.bytes.empty(), ValueError, kOp,
                "the corpus is empty: the " << loader.corpus.files.size()
                                            << " file(s) read hold no bytes; pass files with text in them");
  return std::move(loader.corpus);
}

TextSplit split_text(const TextCorpus& corpus, double validation_fraction) {
  MIXPREC_CHECK(validation_fraction > 0.0 && validation_fraction < 1.0, ValueError, "split_text",
                "validation_fraction must be in (0, 1), got " << validation_fraction
                                                              << "; e.g. 0.1 keeps the last 10% for validation");
  const std::size_t n = corpus.bytes.size();
  const auto n_val = static_cast<std::size_t>(std::floor(static_cast<double>(n) * validation_fraction));
  const auto cut = corpus.bytes.begin() + static_cast<std::ptrdiff_t>(n - n_val);
  TextSplit out;
  out.train.assign(corpus.bytes.begin(), cut);
  out.validation.assign(cut, corpus.bytes.end());
  return out;
}

}  // namespace mixprec::data
