// cpu fp8 recipe kernels. The scaled cast splits the array in fixed chunks over the threads; each
// element is fp8_scale_math.h's (the reference's) own step and each chunk's amax a max of bit
// patterns, combined by an atomic max: exact and order-free, so threads change no bit. The
// scale update is not here: it touches one small history, so the cpu table leaves it to the
// reference (the backend's logged fallback), which is the kernel a thread would only slow.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/fp8_scale.h"
#include "kernels/spec/fp8_scale_checks.h"
#include "kernels/spec/fp8_scale_math.h"

namespace mixprec::kernels::cpu {
namespace {

/// Elements per chunk: 64K f32 (256 KiB) keep a thread streaming; below it one thread runs.
constexpr std::int64_t kChunk = 65536;

/// Cast (when out is not null) and the largest |x| pattern of elements [begin, begin + len).
template <class T>
std::uint32_t cast_chunk(const T* in, std::uint8_t* out, std::int64_t begin, std::int64_t len,
                         float scale, bool e4m3) {
  std::uint32_t m = 0;
  if (out == nullptr) {
    for (std::int64_t i = begin; i < begin + len; ++i) {
      m = std::max(m, fp8_math::abs_bits(static_cast<float>(in[i])));
    }
    return m;
  }
  for (std::int64_t i = begin; i < begin + len; ++i) {
    const float v = static_cast<float>(in[i]);
    m = std::max(m, fp8_math::abs_bits(v));
    out[i] = fp8_math::scaled_cast(v, scale, e4m3);
  }
  return m;
}

}  // namespace

void fp8_scaled_cast(const void* x, DType x_dtype, void* y, DType format, std::int64_t n,
                     const float* scale, float* amax) {
  detail::check_fp8_scaled_cast(x_dtype, y, format, n, scale, amax);
  log_simd("fp8_scaled_cast", dtype_label(x_dtype, format));
  const bool e4m3 = format == DType::f8e4m3;
  auto* out = static_cast<std::uint8_t*>(y);
  const float s = out != nullptr ? *scale : 1.0f;
  std::atomic<std::uint32_t> m{0};
  dispatch(x_dtype, [&](auto t) {
    const auto* in = static_cast<const decltype(t)*>(x);
    parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
      const std::uint32_t local = cast_chunk(in, out, begin, len, s, e4m3);
      std::uint32_t seen = m.load(std::memory_order_relaxed);
      while (seen < local && !m.compare_exchange_weak(seen, local, std::memory_order_relaxed)) {
      }
    });
  });
  if (amax != nullptr) *amax = std::bit_cast<float>(m.load());
}

}  // namespace mixprec::kernels::cpu
