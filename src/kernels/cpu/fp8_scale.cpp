// cpu fp8 recipe kernels. The scaled cast splits the array in fixed chunks over the threads; each
// chunk runs on Highway lanes (fp8_cast_simd.h: fp8_scale_math.h's element, bit for bit) and
// its amax, a max of bit patterns, is combined by an atomic max: exact and order-free, so
// threads change no bit. The scale update is not here: it touches one small history, so the cpu
// table leaves it to the reference (the backend's logged fallback), which is the kernel a thread
// would only slow.
#include <atomic>
#include <bit>
#include <cstdint>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/fp8_cast_simd.h"
#include "kernels/fp8_scale.h"
#include "kernels/spec/fp8_scale_checks.h"

namespace mixprec::kernels::cpu {
namespace {

/// Elements per chunk: 64K f32 (256 KiB) keep a thread streaming; below it one thread runs.
constexpr std::int64_t kChunk = 65536;

}  // namespace

void fp8_scaled_cast(const void* x, DType x_dtype, void* y, DType format, std::int64_t n,
                     const float* scale, float* amax) {
  detail::check_fp8_scaled_cast(x_dtype, y, format, n, scale, amax);
  log_simd("fp8_scaled_cast", dtype_label(x_dtype, format));
  const bool e4m3 = format == DType::f8e4m3;
  auto* out = static_cast<std::uint8_t*>(y);
  const float s = out != nullptr ? *scale : 1.0f;
  std::atomic<std::uint32_t> m{0};
  parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
    const std::uint32_t local =
        fp8_scaled_cast_span(at(x, x_dtype, begin), x_dtype, out != nullptr ? out + begin : nullptr,
                             static_cast<std::size_t>(len), s, e4m3);
    std::uint32_t seen = m.load(std::memory_order_relaxed);
    while (seen < local && !m.compare_exchange_weak(seen, local, std::memory_order_relaxed)) {
    }
  });
  if (amax != nullptr) *amax = std::bit_cast<float>(m.load());
}

}  // namespace mixprec::kernels::cpu
