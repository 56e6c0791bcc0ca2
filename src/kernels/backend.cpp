// Backend selection (MIXPREC_BACKEND, set_backend) and the kernels:: entry points, each a
// forward to the active backend's table.
#include "kernels/backend.h"

#include <atomic>
#include <concepts>
#include <iterator>
#include <span>
#include <type_traits>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "mixprec/core/device.h"
#include "mixprec/core/error.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

std::string& env_warning() {
  static std::string w;
  return w;
}

const Backend* from_env() {
  const char* v = std::getenv("MIXPREC_BACKEND");
  if (v == nullptr || *v == '\0') return &cpu_backend();
  const std::string_view s(v);
  if (s == "cpu") return &cpu_backend();
  if (s == "ref") return &ref_backend();
  if (s == "devsim") return &devsim_backend();  // core/device.cpp reads it too: memory follows
  env_warning() = std::string("MIXPREC_BACKEND=") + v +
                  " is not a backend (known: cpu, ref, devsim); running the cpu backend";
  std::fprintf(stderr, "mixprec: warning: %s\n", env_warning().c_str());
  return &cpu_backend();
}

std::atomic<const Backend*>& active() {
  static std::atomic<const Backend*> b{from_env()};
  return b;
}

}  // namespace

const Backend& backend() { return *active().load(std::memory_order_relaxed); }

std::string set_backend(const std::string& name) {
  const Backend* next = name == "cpu"      ? &cpu_backend()
                        : name == "ref"    ? &ref_backend()
                        : name == "devsim" ? &devsim_backend()
                        : name == "cuda"   ? &cuda_backend()
                                           : nullptr;
  MIXPREC_CHECK(next != nullptr, ValueError, "set_backend",
                "unknown backend '" << name << "'; known: cpu, ref, devsim, cuda");
  set_current_device(next == &devsim_backend() ? Device{DeviceType::devsim, 0}
                     : next == &cuda_backend() ? Device{DeviceType::cuda, 0}
                                               : Device{});
  return active().exchange(next)->name;
}

const Backend& set_backend(const Backend& b) { return *active().exchange(&b); }

const Backend& host_backend() {
  const Backend& b = backend();
  if (&b == &devsim_backend()) return ref_backend();
  // cuda's kernels take device addresses only: host arrays (data sets, the public conversions)
  // run on the cpu kernels, whose conversions and max-reductions are the reference's bits.
  if (&b == &cuda_backend()) return cpu_backend();
  return b;
}

std::string backend_env_warning() {
  (void)backend();
  return env_warning();
}

// ---- entry points ----

namespace {

/// The table field of kernel `Name` (&Backend::unary for "unary").
template <EntryName Name>
consteval auto field_of() {
  constexpr std::string_view name(Name.text);
#define MIXPREC_FIELD_CASE(entry) if constexpr (name == #entry) return &Backend::entry; else
  MIXPREC_KERNEL_ENTRIES(MIXPREC_FIELD_CASE)
#undef MIXPREC_FIELD_CASE
  return nullptr;
}

/// The dtypes a call names: its DType arguments and every dtype its descriptors and strided
/// operands carry (their for_each_dtype, kernels/dtype_visit.h), in argument order.
struct CallDTypes {
  // The most any kernel names: unary_backward's and add_layer_norm_forward's four, a batch's
  // distinct dtypes (at most five), matmul's three; room to spare, and an assert past it.
  DType v[16];
  std::size_t n = 0;
  void push(DType t) {
    MIXPREC_ASSERT(n < std::size(v));
    v[n++] = t;
  }
  template <class T>
  void add(const T& arg) {
    if constexpr (std::is_same_v<T, DType>) {
      push(arg);
    } else if constexpr (requires { arg.for_each_dtype([](DType) {}); }) {
      arg.for_each_dtype([this](DType t) { push(t); });
    } else {
      // A descriptor that holds a dtype must say so through for_each_dtype, or supports() and
      // the fallback's log would not see it.
      static_assert(!requires { arg.dtype; },
                    "a kernel argument with a dtype member needs for_each_dtype (dtype_visit.h)");
    }
  }
  std::span<const DType> span() const { return {v, n}; }
  std::string label() const {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s.append(i ? "," : "").append(name(v[i]));
    return s.empty() ? "-" : s;
  }
};

/// Where a call that backend `b` cannot run goes: its fallback (logged), or a BackendError
/// naming the kernel, the dtypes and the backend.
const Backend& fall_back(const Backend& b, const char* entry, bool filled,
                         const CallDTypes& dtypes, bool fallback_filled) {
  const std::string why = std::string(b.name) + " has no " + entry + " kernel" +
                          (filled ? " for " + dtypes.label() : std::string());
  const Backend* fb = b.fallback != nullptr ? &b.fallback() : nullptr;
  MIXPREC_CHECK(fb != nullptr && fallback_filled, BackendError, entry,
                why << " and no fallback to run it on; use a dtype it supports or another "
                       "backend (MIXPREC_BACKEND)");
  if (verbose_enabled()) verbose_log(entry, dtypes.label(), "reference", why);
  return *fb;
}

}  // namespace

template <EntryName Name, class R, class... P>
R EntryPoint<Name, R(P...)>::operator()(P... args) const {
  constexpr auto field = field_of<Name>();
  const Backend& b = backend();
  if (b.supports == nullptr && b.*field != nullptr) {
    // A backend without restrictions (ref, devsim): the verbose log names it on every call
    // (the cpu kernels log their own lines, naming the SIMD target that ran).
    if (verbose_enabled()) {
      verbose_log(Name.text, "-", b.name, std::string("MIXPREC_BACKEND=") + b.name);
    }
    return (b.*field)(std::forward<P>(args)...);
  }
  CallDTypes dtypes;
  (dtypes.add(args), ...);
  const bool filled = b.*field != nullptr;
  if (filled && (b.supports == nullptr || b.supports(entry_index(Name.text), dtypes.span()))) {
    return (b.*field)(std::forward<P>(args)...);
  }
  const bool fallback_filled = b.fallback != nullptr && b.fallback().*field != nullptr;
  return (fall_back(b, Name.text, filled, dtypes, fallback_filled).*field)(std::forward<P>(args)...);
}

#define MIXPREC_INSTANTIATE_ENTRY_POINT(entry) template struct EntryPoint<#entry, decltype(ref::entry)>;
MIXPREC_KERNEL_ENTRIES(MIXPREC_INSTANTIATE_ENTRY_POINT)
#undef MIXPREC_INSTANTIATE_ENTRY_POINT

bool unscale_inplace(void* data, DType dtype, std::size_t n, float inv, float* amax) {
  float found = 0.0f;
  unscale(data, dtype, n, inv, &found, amax);
  return found != 0.0f;
}

}  // namespace mixprec::kernels
