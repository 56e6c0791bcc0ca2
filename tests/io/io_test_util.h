#pragma once
// Helpers for the io tests: a scratch directory removed on destruction, raw-bit tensors.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "mixprec/core/tensor.h"

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
