#pragma once
// What the GPU-only kernel tests share (test_cudnn_*_gpu.cpp): whether this run is on a GPU,
// device buffers from the backend's allocator, and a closeness check scaled to the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "core/cuda_runtime.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels::gputest {

/// True when MIXPREC_CONFORMANCE_DEVICE names cuda (scripts/check-cuda.sh's conformance run).
inline bool on_cuda() {
  const char* env = std::getenv("MIXPREC_CONFORMANCE_DEVICE");
  return env != nullptr && std::string(env).rfind("cuda", 0) == 0;
}

/// The reason a GPU test gives when it skips.
inline const char* kSkipReason =
    "GPU test: runs with MIXPREC_CONFORMANCE_DEVICE=cuda (scripts/check-cuda.sh)";

/// Device memory from the backend's allocator, filled from (and read back into) host bytes.
class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes)
      : bytes_(bytes), p_(mixprec::detail::cuda_block_cache().acquire(bytes)) {}
  DeviceBytes(const void* host, std::size_t bytes) : DeviceBytes(bytes) {
    mixprec::detail::cuda_upload(p_, host, bytes);
  }
  ~DeviceBytes() { mixprec::detail::cuda_block_cache().release(p_, bytes_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* get() const { return p_; }
  void to_host(void* host) const { mixprec::detail::cuda_download(host, p_, bytes_); }

 private:
  std::size_t bytes_;
  void* p_;
};

/// The bytes of a test buffer's elements.
inline std::size_t bytes_of(const ktest::Buffer& b) {
  return static_cast<std::size_t>(b.size()) * size_of(b.dtype());
}

/// |got - want| <= tol * (|want| + rms(want)) elementwise: a few eps of the dtype relative to the
/// output's magnitude (a small element is judged against its tensor's typical size).
inline void expect_close(const ktest::Buffer& got, const ktest::Buffer& want, double tol,
                         const std::string& what) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < want.size(); ++i) sum += double(want.get(i)) * want.get(i);
  const double rms = std::sqrt(sum / static_cast<double>(want.size()));
  std::int64_t bad = 0, worst = 0;
  double worst_ratio = 0.0;
  for (std::int64_t i = 0; i < want.size(); ++i) {
    const double w = want.get(i), g = got.get(i);
    const double ratio = std::fabs(g - w) / (tol * (std::fabs(w) + rms));
    if (!(ratio <= 1.0)) ++bad;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size() << " elements off; worst at "
                    << worst << ": " << got.get(worst) << " vs " << want.get(worst)
                    << " (rms " << rms << ", " << worst_ratio << " x tolerance)";
}

}  // namespace mixprec::kernels::gputest
