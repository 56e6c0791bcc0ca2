#include "kernels/cpu/onednn_context.h"

#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels::cpu {
namespace {

[[noreturn]] void unavailable(const char* op, const dnnl::error& e) {
  throw BackendError(op, std::string("oneDNN is unavailable (") + e.what() +
                             "); set MIXPREC_MATMUL=ref to use the reference kernel");
}

struct AlignedFree {
  void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
};

/// MIXPREC_ISA caps oneDNN too, so that `MIXPREC_ISA=avx2` on an AVX-512 machine runs the
/// GEMMs and convolutions an AVX2 machine runs (and so does a MIXPREC_CPU_PROFILE below the real
/// CPU: the level that executes is what counts). oneDNN takes the cap only before its first
/// primitive, so it is applied when the library loads and a later set_max_isa() does not reach
/// it (the Highway kernels follow at once).
void cap_onednn_isa() {
#if defined(__x86_64__)
  const Isa level = executed_isa();
  if (level == hardware_isa()) return;  // not capped
  dnnl::cpu_isa isa = dnnl::cpu_isa::avx512_core;
  switch (level) {
    case Isa::scalar:
    case Isa::sse4: isa = dnnl::cpu_isa::sse41; break;
    case Isa::avx2: isa = dnnl::cpu_isa::avx2; break;
    default: break;
  }
  try {
    dnnl::set_max_cpu_isa(isa);
  } catch (const dnnl::error&) {
    // Already fixed by an earlier primitive (or ONEDNN_MAX_CPU_ISA): oneDNN keeps its choice.
  }
#endif
}

// At load, before anything (mixprec env's oneDNN description included) can fix oneDNN's ISA.
[[maybe_unused]] const bool kOnednnCapped = (cap_onednn_isa(), true);

}  // namespace

const dnnl::engine& onednn_engine(const char* op) {
  // A throwing initialiser leaves the static uninitialised, so a later call retries. Never
  // destroyed: cached primitives (also leaked) may outlive any static destructor order.
  static const dnnl::engine* engine = [op] {
    try {
      return new dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      unavailable(op, e);
    }
  }();
  return *engine;
}

dnnl::stream& onednn_stream(const char* op) {
  thread_local dnnl::stream stream = [op] {
    try {
      return dnnl::stream(onednn_engine(op));
    } catch (const dnnl::error& e) {
      unavailable(op, e);
    }
  }();
  return stream;
}

void* onednn_scratchpad(std::size_t bytes) {
  thread_local std::unique_ptr<std::byte[], AlignedFree> buffer;
  thread_local std::size_t capacity = 0;
  if (bytes > capacity) {
    buffer.reset();  // free first so the old and new buffers never coexist
    capacity = 0;
    buffer.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64})));
    capacity = bytes;
  }
  return buffer.get();
}

dnnl::memory::data_type to_dnnl(DType t) {
  switch (t) {
    case DType::f32: return dnnl::memory::data_type::f32;
    case DType::bf16: return dnnl::memory::data_type::bf16;
    case DType::f16: return dnnl::memory::data_type::f16;
    case DType::f8e4m3:
    case DType::f8e5m2: break;
  }
  MIXPREC_ASSERT(false);
  return dnnl::memory::data_type::undef;
}

}  // namespace mixprec::kernels::cpu
