#pragma once
/// The only ways bytes cross between the host and a device: download (device -> host, which
/// waits for the device: a host synchronisation) and upload (host -> device). Each is counted,
/// with the reason the innermost TransferReason names, so `mixprec profile` can report the bytes
/// moved and the host synchronisations of one training step, and MIXPREC_VERBOSE=1 names each
/// kind of crossing the first time it happens.
///
/// On the cpu device the same calls mark the same points (a host read of a value the step
/// computed still costs a synchronisation on a real device) and count them, but move no bytes:
/// bytes_down/bytes_up count only bytes that really crossed.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "mixprec/core/device.h"

namespace mixprec {

struct TransferStats {
  std::uint64_t downloads = 0;   ///< device -> host reads (each a host synchronisation)
  std::uint64_t uploads = 0;     ///< host -> device writes
  std::uint64_t bytes_down = 0;  ///< bytes that crossed device -> host (0 on cpu)
  std::uint64_t bytes_up = 0;    ///< bytes that crossed host -> device (0 on cpu)
  /// Downloads by reason ("loss for the log", "found-inf", ...).
  std::map<std::string, std::uint64_t> downloads_by_reason;
};

/// A snapshot of the counters since the process started (thread-safe).
TransferStats transfer_stats();
/// The counts of `now` minus those of `before` (per reason too).
TransferStats transfer_delta(const TransferStats& before, const TransferStats& now);

/// Names why the transfers inside its scope happen (thread-local; scopes nest, the innermost
/// wins). Without one a transfer counts as "unlabelled".
class TransferReason {
 public:
  explicit TransferReason(const char* why) noexcept;
  ~TransferReason();
  TransferReason(const TransferReason&) = delete;
  TransferReason& operator=(const TransferReason&) = delete;
  /// The innermost reason in force on this thread.
  static const char* current() noexcept;

 private:
  const char* previous_;
};

/// Copies `bytes` from device memory `src` (on `device`) to host memory `dst`, waiting for it.
void download(void* dst, const void* src, std::size_t bytes, Device device);
/// Copies `bytes` from host memory `src` to device memory `dst` (on `device`).
void upload(void* dst, const void* src, std::size_t bytes, Device device);
/// Copies `bytes` between two blocks of memory on the same device (nothing crosses).
void device_copy(void* dst, const void* src, std::size_t bytes, Device device);
/// Sets `bytes` of device memory to the byte value (a device-side memset: nothing crosses).
void device_memset(void* dst, int value, std::size_t bytes, Device device);

/// Waits until `device` has finished the work queued on it so far: what a timer on the host does
/// before it reads the clock (a benchmark's step, a profiled op), since device work is queued, not
/// done, when the call that queued it returns. Moves nothing and counts no download; nothing on
/// cpu and devsim, whose kernels finish before they return.
void synchronize(Device device);

namespace detail {
/// Device memory for Storage: the device's allocator (the host block cache for cpu; tagged
/// blocks for devsim). nullptr when out of memory.
void* device_allocate(std::size_t bytes, Device device);
void device_release(void* block, std::size_t bytes, Device device);
/// Counts a transfer of `bytes` without copying: for a host device, where the caller reads or
/// writes the memory in place (a conversion straight from the tensor, say).
void count_transfer(bool download, std::size_t bytes, Device device);
}  // namespace detail

}  // namespace mixprec
