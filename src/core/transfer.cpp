// Counted host <-> device transfers and the device allocators behind Storage.
#include "mixprec/core/transfer.h"

#include <cstdio>
#include <cstring>
#include <sstream>
#include <mutex>
#include <set>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "core/block_cache.h"
#include "core/cuda_runtime.h"
#include "core/device_graph.h"
#include "core/devsim_memory.h"
#include "mixprec/core/error.h"
#include "mixprec/core/memory.h"
#include "mixprec/core/verbose.h"

namespace mixprec {
namespace {

thread_local const char* t_reason = nullptr;

struct Counters {
  std::mutex mu;
  TransferStats stats;
  std::set<std::pair<std::string, std::string>> logged;  // (direction, reason) already named
};

Counters& counters() {
  static Counters* c = new Counters();  // never destroyed: tensors may die after main returns
  return *c;
}

}  // namespace

namespace detail {
void count_transfer(bool down, std::size_t bytes, Device device) {
  const char* why = TransferReason::current();
  const std::size_t crossed = device.is_host() ? 0 : bytes;
  Counters& c = counters();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (down) {
      ++c.stats.downloads;
      c.stats.bytes_down += crossed;
      ++c.stats.downloads_by_reason[why];
    } else {
      ++c.stats.uploads;
      c.stats.bytes_up += crossed;
    }
    // Only real crossings are logged: on the host nothing moves (the counts still mark the point).
    if (verbose_enabled() && !device.is_host()) {
      first = c.logged.emplace(down ? "download" : "upload", why).second;
    }
  }
  if (first) {
    std::fprintf(stderr, "mixprec: transfer: %s of %zu bytes %s %s (%s); later ones are counted "
                 "silently (mixprec profile reports them per step)\n",
                 down ? "download" : "upload", bytes, down ? "from" : "to",
                 to_string(device).c_str(), why);
  }
}
}  // namespace detail

namespace {

void check_device_pointer(const void* p, std::size_t bytes, Device device, const char* what) {
  if (bytes == 0) return;
  MIXPREC_CHECK(p != nullptr, ValueError, what, "null device pointer for " << bytes << " bytes");
  if (device.type == DeviceType::devsim) {
    MIXPREC_CHECK(detail::is_devsim_address(p), InternalError, what,
                  "the device pointer " << p << " is not devsim memory (a host pointer passed "
                  "where device memory belongs; a mixprec bug, please report it)");
  }
}

}  // namespace

TransferReason::TransferReason(const char* why) noexcept : previous_(t_reason) { t_reason = why; }
TransferReason::~TransferReason() { t_reason = previous_; }
const char* TransferReason::current() noexcept {
  return t_reason != nullptr ? t_reason : "unlabelled";
}

TransferStats transfer_stats() {
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

TransferStats transfer_delta(const TransferStats& before, const TransferStats& now) {
  TransferStats d;
  d.downloads = now.downloads - before.downloads;
  d.uploads = now.uploads - before.uploads;
  d.bytes_down = now.bytes_down - before.bytes_down;
  d.bytes_up = now.bytes_up - before.bytes_up;
  for (const auto& [why, n] : now.downloads_by_reason) {
    const auto it = before.downloads_by_reason.find(why);
    const std::uint64_t b = it == before.downloads_by_reason.end() ? 0 : it->second;
    if (n > b) d.downloads_by_reason[why] = n - b;
  }
  return d;
}

void download(void* dst, const void* src, std::size_t bytes, Device device) {
  check_device_pointer(src, bytes, device, "download");
  (void)detail::capture_takes(device, "a download", false, {});
  detail::count_transfer(true, bytes, device);
  if (bytes == 0) return;
  if (device.type == DeviceType::cuda) return detail::cuda_download(dst, src, bytes);
  const void* host = device.type == DeviceType::devsim ? detail::devsim_untag(src) : src;
  std::memcpy(dst, host, bytes);
}

void upload(void* dst, const void* src, std::size_t bytes, Device device) {
  check_device_pointer(dst, bytes, device, "upload");
  (void)detail::capture_takes(device, "an upload", false, {});
  detail::count_transfer(false, bytes, device);
  if (bytes == 0) return;
  if (device.type == DeviceType::cuda) return detail::cuda_upload(dst, src, bytes);
  void* host = device.type == DeviceType::devsim ? detail::devsim_untag(dst) : dst;
  std::memcpy(host, src, bytes);
}

void device_copy(void* dst, const void* src, std::size_t bytes, Device device) {
  check_device_pointer(dst, bytes, device, "device_copy");
  check_device_pointer(src, bytes, device, "device_copy");
  if (bytes == 0) return;
  const bool sim = device.type == DeviceType::devsim;
  void* to = sim ? detail::devsim_untag(dst) : dst;
  const void* from = sim ? detail::devsim_untag(src) : src;
  // (The check first: the recorded call is a heap-allocated function, built only in a capture.)
  if (detail::capture_watched() &&
      detail::capture_takes(device, "a device copy", true, [=] { std::memcpy(to, from, bytes); })) {
    return;
  }
  if (device.type == DeviceType::cuda) return detail::cuda_device_copy(dst, src, bytes);
  std::memcpy(to, from, bytes);
}

void device_memset(void* dst, int value, std::size_t bytes, Device device) {
  check_device_pointer(dst, bytes, device, "device_memset");
  if (bytes == 0) return;
  void* host = device.type == DeviceType::devsim ? detail::devsim_untag(dst) : dst;
  if (detail::capture_watched() &&
      detail::capture_takes(device, "a device memset", true, [=] { std::memset(host, value, bytes); })) {
    return;
  }
  if (device.type == DeviceType::cuda) return detail::cuda_memset(dst, value, bytes);
  std::memset(host, value, bytes);
}

void synchronize(Device device) {
  (void)detail::capture_takes(device, "a synchronize", false, {});
  if (device.type == DeviceType::cuda) detail::cuda_synchronize();
}

namespace detail {

void* device_allocate(std::size_t bytes, Device device) {
  switch (device.type) {
    case DeviceType::cpu: return BlockCache::instance().acquire(bytes);
    case DeviceType::devsim: {
      // The simulated device's memory is host memory at an address the host cannot use.
      void* block = BlockCache::instance().acquire(bytes);
#if defined(__SANITIZE_ADDRESS__)
      // Reachable only through the tagged address, which LeakSanitizer cannot follow: a block
      // held at exit (a weight copy in the process's store) would read as leaked. The Storage
      // that holds the address is an object of its own, whose leak is still reported.
      if (block != nullptr) __lsan_ignore_object(block);
#endif
      return block == nullptr ? nullptr : devsim_tag(block);
    }
    case DeviceType::cuda: {
      void* block = cuda_block_cache().acquire(bytes);
      if (block == nullptr) {
        const MemoryStats m = memory_stats();
        std::ostringstream peaks;
        for (std::size_t c = 0; c < kMemoryCategoryCount; ++c) {
          peaks << (c ? ", " : "") << name(static_cast<MemoryCategory>(c)) << ' ' << m.peak[c];
        }
        MIXPREC_CHECK(false, BackendError, "Storage",
                      to_string(device) << " is out of memory: " << bytes
                                        << " bytes asked for, " << m.total_current
                                        << " bytes in tensors (peaks by category, bytes: "
                                        << peaks.str() << ")");
      }
      return block;
    }
  }
  return nullptr;
}

void device_release(void* block, std::size_t bytes, Device device) {
  if (block == nullptr) return;
  if (device.type == DeviceType::cuda) return cuda_block_cache().release(block, bytes);
  BlockCache::instance().release(device.type == DeviceType::devsim ? devsim_untag(block) : block,
                                 bytes);
}

}  // namespace detail
}  // namespace mixprec
