#pragma once
/// Where memory lives. Every Storage (and so every Tensor) belongs to one device:
///   - cpu: host memory from the block cache; the host may read it directly;
///   - devsim: a simulated accelerator (MIXPREC_BACKEND=devsim). Its allocator returns addresses
///     the host cannot dereference (a non-canonical tag on x86-64, a kernel-half address bit on
///     arm64), its kernels translate them and run the reference, and bytes reach the host only
///     through the counted transfers of transfer.h. A stray host read of tensor memory faults at
///     once, so the simulated device proves without a GPU that the engine keeps its bytes in place;
///   - cuda: an NVIDIA GPU (the CUDA backend, where one is built and present).
/// New tensors go to current_device(): the device of the active kernel backend.
#include <cstdint>
#include <string>

namespace mixprec {

enum class DeviceType : std::uint8_t { cpu, devsim, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  /// True if the host may dereference this device's memory (cpu only).
  bool is_host() const noexcept { return type == DeviceType::cpu; }
  bool operator==(const Device&) const = default;
};

/// "cpu", "devsim:0", "cuda:1".
std::string to_string(Device device);
/// Parses "cpu", "devsim", "devsim:N", "cuda", "cuda:N"; ValueError naming the accepted forms.
Device parse_device(const std::string& text);

/// The device new storage is allocated on: devsim:0 when MIXPREC_BACKEND=devsim (or after
/// kernels::set_backend("devsim")), else cpu.
Device current_device();
/// Sets it (kernels::set_backend does, so the backend and the memory agree); returns the previous.
Device set_current_device(Device device);

}  // namespace mixprec
