#pragma once
// Helpers for the elementwise / reduce / softmax kernel tests: typed buffers, random data,
// an ISA cap that restores itself, and element-by-element comparison with a tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"

namespace mixprec::ktest {

inline constexpr DType kAllDTypes[] = {DType::f32, DType::bf16, DType::f16};

/// The host memory a device conformance run may copy to a device: every Buffer and HostArray
/// registers [begin, begin + bytes) while it lives, so a kernel argument that points into one
/// can be staged whole (tests/conformance/device_staging.h). A pointer found in no range is a
/// host side-array the harness cannot size: that run fails and names the argument.
class HostRanges {
 public:
  static HostRanges& instance() {
    static HostRanges r;
    return r;
  }
  void add(const void* begin, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    ranges_[static_cast<const std::uint8_t*>(begin)] = bytes;
  }
  void remove(const void* begin) {
    std::lock_guard<std::mutex> lock(mu_);
    ranges_.erase(static_cast<const std::uint8_t*>(begin));
  }
  /// The registered range that contains p, or {nullptr, 0}.
  std::pair<const std::uint8_t*, std::size_t> find(const void* p) const {
    std::lock_guard<std::mutex> lock(mu_);
    const auto* q = static_cast<const std::uint8_t*>(p);
    auto it = ranges_.upper_bound(q);
    if (it == ranges_.begin()) return {nullptr, 0};
    --it;
    if (q < it->first + it->second) return {it->first, it->second};
    return {nullptr, 0};
  }

 private:
  mutable std::mutex mu_;
  std::map<const std::uint8_t*, std::size_t> ranges_;
};

/// Bytes on the heap registered with HostRanges while they live (the heap block moves with the
/// vector, so a move keeps the registration; a copy registers its own).
class RegisteredBytes {
 public:
  explicit RegisteredBytes(std::size_t bytes) : bytes_(bytes) { enroll(); }
  RegisteredBytes(const RegisteredBytes& o) : bytes_(o.bytes_) { enroll(); }
  RegisteredBytes(RegisteredBytes&& o) noexcept : bytes_(std::move(o.bytes_)) { o.bytes_.clear(); }
  RegisteredBytes& operator=(const RegisteredBytes& o) {
    if (this != &o) {
      withdraw();
      bytes_ = o.bytes_;
      enroll();
    }
    return *this;
  }
  RegisteredBytes& operator=(RegisteredBytes&& o) noexcept {
    if (this != &o) {
      withdraw();
      bytes_ = std::move(o.bytes_);
      o.bytes_.clear();
    }
    return *this;
  }
  ~RegisteredBytes() { withdraw(); }
  std::uint8_t* data() { return bytes_.data(); }
  const std::uint8_t* data() const { return bytes_.data(); }

 private:
  void enroll() {
    if (!bytes_.empty()) HostRanges::instance().add(bytes_.data(), bytes_.size());
  }
  void withdraw() {
    if (!bytes_.empty()) HostRanges::instance().remove(bytes_.data());
  }
  std::vector<std::uint8_t> bytes_;
};

/// n elements of one dtype in a byte buffer, with f32 get/set (set rounds like T(value)).
class Buffer {
 public:
  Buffer(DType dtype, std::int64_t n)
      : dtype_(dtype), n_(n), bytes_(static_cast<std::size_t>(n) * size_of(dtype) + 1) {}
  DType dtype() const { return dtype_; }
  std::int64_t size() const { return n_; }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  float get(std::int64_t i) const {
    return dispatch(dtype_, [&](auto t) {
      return static_cast<float>(static_cast<const decltype(t)*>(data())[i]);
    });
  }
  void set(std::int64_t i, float v) {
    dispatch(dtype_, [&](auto t) {
      using T = decltype(t);
      static_cast<T*>(data())[i] = T(v);
    });
  }
  /// Raw bits of element i (for bit-exact comparisons, NaN payloads included).
  std::uint32_t bits(std::int64_t i) const {
    std::uint32_t b = 0;
    std::memcpy(&b, static_cast<const char*>(data()) + i * size_of(dtype_), size_of(dtype_));
    return b;
  }

 private:
  DType dtype_;
  std::int64_t n_;
  RegisteredBytes bytes_;
};

/// n values of a plain type (indices, per-row factors, single results) in registered memory:
/// what a kernel reads or writes beside its Buffers, so a device run can stage it too.
template <class T>
class HostArray {
 public:
  explicit HostArray(std::size_t n, T value = T{}) : n_(n), bytes_((n ? n : 1) * sizeof(T)) {
    for (std::size_t i = 0; i < n; ++i) data()[i] = value;
  }
  T* data() { return reinterpret_cast<T*>(bytes_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(bytes_.data()); }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  std::size_t size() const { return n_; }

 private:
  std::size_t n_;
  RegisteredBytes bytes_;
};

/// Uniform values in [lo, hi), rounded to dtype; deterministic for a seed.
inline Buffer random_buffer(DType dtype, std::int64_t n, float lo, float hi, std::uint32_t seed) {
  Buffer b(dtype, n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (std::int64_t i = 0; i < n; ++i) b.set(i, dist(rng));
  return b;
}

/// Caps the ISA for the lifetime of the object, then restores the previous level.
class IsaCap {
 public:
  explicit IsaCap(Isa cap) : saved_(max_isa()) { set_max_isa(cap); }
  ~IsaCap() { set_max_isa(saved_); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;

 private:
  Isa saved_;
};

/// The ISA levels to test: every level this CPU supports, best first, down to scalar (Highway's
/// portable target). Each caps Highway's dispatch, so each runs a different compiled target.
inline std::vector<Isa> isas_to_test() {
  std::vector<Isa> v = supported_isas();
  return {v.rbegin(), v.rend()};
}

inline double eps(DType t) { return traits(t).epsilon; }

/// Expects |got[i] - want[i]| <= tol(i) for every i; NaN must meet NaN and an infinity the
/// same infinity. Reports the first few failures and the count.
inline void expect_close(const Buffer& got, const Buffer& want,
                         const std::function<double(std::int64_t)>& tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::int64_t bad = 0;
  std::ostringstream first;
  for (std::int64_t i = 0; i < got.size(); ++i) {
    const double g = got.get(i), w = want.get(i);
    bool ok;
    if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
    else if (std::isinf(w) || std::isinf(g)) ok = g == w;
    else ok = std::fabs(g - w) <= tol(i);
    if (!ok && bad++ < 5) {
      first << "\n  [" << i << "] got " << g << " want " << w << " (diff " << std::fabs(g - w)
            << ", tol " << tol(i) << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ"
                    << first.str();
}

/// Tolerance atol + |want| * k * eps(dtype of want).
inline void expect_close(const Buffer& got, const Buffer& want, double atol, double k,
                         const std::string& what) {
  const double e = eps(want.dtype());
  expect_close(got, want, [&](std::int64_t i) { return atol + std::fabs(want.get(i)) * k * e; },
               what);
}

/// Expects the two buffers to hold the same bits.
inline void expect_bitwise(const Buffer& got, const Buffer& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  std::int64_t bad = 0;
  std::ostringstream first;
  for (std::int64_t i = 0; i < got.size(); ++i) {
    if (got.bits(i) != want.bits(i) && bad++ < 5) {
      first << "\n  [" << i << "] got " << got.get(i) << " (0x" << std::hex << got.bits(i)
            << ") want " << want.get(i) << " (0x" << want.bits(i) << std::dec << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ"
                    << first.str();
}

/// A [n, c, h, w] NCHW buffer's elements in channels-last order (bits copied, NaN payloads kept).
inline Buffer to_channels_last(const Buffer& b, std::int64_t n, std::int64_t c, std::int64_t h,
                        std::int64_t w) {
  Buffer out(b.dtype(), b.size());
  const std::size_t es = size_of(b.dtype());
  for (std::int64_t s = 0; s < n; ++s)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = 0; p < h * w; ++p) {
        std::memcpy(static_cast<char*>(out.data()) + ((s * h * w + p) * c + ch) * es,
                    static_cast<const char*>(b.data()) + ((s * c + ch) * h * w + p) * es, es);
      }
  return out;
}

}  // namespace mixprec::ktest
