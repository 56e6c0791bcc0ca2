#pragma once
// Runs a device backend's kernels on the conformance cases' host buffers. A case calls
// `b.<entry>(...)` with host pointers into ktest::Buffer / HostArray memory (registered in
// ktest::HostRanges); the staged table's entry copies each buffer an argument points into to the
// device (kernels/device_pointers.h finds every address, descriptors included), calls the device
// backend's kernel on the device addresses, and downloads the buffers it was given writable
// pointers to. So the very cases that check cpu against ref check a device backend: devsim on
// every machine (which proves the staging and the device-memory contract), cuda on a GPU.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/device_pointers.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/device.h"
#include "mixprec/core/transfer.h"

namespace mixprec::kernels::conformance {

/// The device copies of one call's host buffers (a visitor for call_mapped).
class StageToDevice {
 public:
  StageToDevice(Device device, const char* entry) : device_(device), entry_(entry) {}
  ~StageToDevice() {
    for (Block& b : blocks_) mixprec::detail::device_release(b.device, b.bytes, device_);
  }
  StageToDevice(const StageToDevice&) = delete;
  StageToDevice& operator=(const StageToDevice&) = delete;

  template <class T>
  T* operator()(T* p, const PointerSite& site) {
    const auto [begin, bytes] = ktest::HostRanges::instance().find(p);
    if (begin == nullptr) {
      std::ostringstream why;
      why << entry_ << ": argument " << site.arg << (site.field[0] != '\0' ? "." : "")
          << site.field << " points into no ktest::Buffer or HostArray, so it cannot be staged "
          << "to " << to_string(device_) << " (make the case allocate it as one)";
      throw std::logic_error(why.str());
    }
    Block& b = block(begin, bytes);
    b.written = b.written || site.written;
    auto* at = static_cast<std::uint8_t*>(b.device) + (reinterpret_cast<const std::uint8_t*>(p) - begin);
    return static_cast<T*>(static_cast<void*>(at));
  }

  /// Copies back every buffer the kernel was given a writable pointer into.
  void download_written() {
    for (Block& b : blocks_) {
      if (b.written) download(const_cast<std::uint8_t*>(b.host), b.device, b.bytes, device_);
    }
  }

 private:
  struct Block {
    const std::uint8_t* host;
    std::size_t bytes;
    void* device;
    bool written;
  };

  Block& block(const std::uint8_t* host, std::size_t bytes) {
    for (Block& b : blocks_) {
      if (b.host == host) return b;
    }
    void* d = mixprec::detail::device_allocate(bytes, device_);
    if (d == nullptr) throw std::runtime_error(std::string(entry_) + ": out of device memory");
    blocks_.push_back({host, bytes, d, false});
    upload(d, host, bytes, device_);
    return blocks_.back();
  }

  Device device_;
  const char* entry_;
  std::vector<Block> blocks_;
};

/// The backend under test and its device (one staged harness at a time).
struct StagedTarget {
  const Backend* backend = nullptr;
  Device device{};
};
inline StagedTarget& staged_target() {
  static StagedTarget t;
  return t;
}

template <auto Member, class Fn, EntryName Name>
struct Staged;

template <auto Member, class R, class... A, EntryName Name>
struct Staged<Member, R (*)(A...), Name> {
  static R run(A... a) {
    const StagedTarget& t = staged_target();
    R (*fn)(A...) = t.backend->*Member;
    if (fn == nullptr) {
      throw std::logic_error(std::string(t.backend->name) + " has no " + Name.text + " kernel");
    }
    StageToDevice stage(t.device, Name.text);
    if constexpr (std::is_void_v<R>) {
      call_mapped(stage, fn, static_cast<A>(a)...);
      stage.download_written();
    } else {
      R r = call_mapped(stage, fn, static_cast<A>(a)...);
      stage.download_written();
      return r;
    }
  }
};

/// A table whose every entry runs `target`'s kernel on `device` copies of the host arguments.
inline Backend staged(const Backend& target, Device device) {
  staged_target() = {&target, device};
  Backend b{};
  b.name = target.name;
#define MIXPREC_STAGED_ENTRY(entry) \
  b.entry = &Staged<&Backend::entry, decltype(Backend::entry), #entry>::run;
  MIXPREC_KERNEL_ENTRIES(MIXPREC_STAGED_ENTRY)
#undef MIXPREC_STAGED_ENTRY
  return b;
}

}  // namespace mixprec::kernels::conformance
