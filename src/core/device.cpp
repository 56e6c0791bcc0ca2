#include "mixprec/core/device.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "mixprec/core/error.h"

namespace mixprec {
namespace {

const char* type_name(DeviceType t) {
  switch (t) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::devsim: return "devsim";
    case DeviceType::cuda: return "cuda";
  }
  return "?";
}

// The backend named by MIXPREC_BACKEND decides where memory starts; kernels/backend.cpp reads
// the same variable for the kernels and keeps the two in step through set_current_device.
Device initial_device() {
  const char* v = std::getenv("MIXPREC_BACKEND");
  if (v != nullptr && std::strcmp(v, "devsim") == 0) return Device{DeviceType::devsim, 0};
  return Device{};
}

std::atomic<std::uint32_t>& packed() {
  static std::atomic<std::uint32_t> d{[] {
    const Device dev = initial_device();
    return static_cast<std::uint32_t>(dev.type) << 16 | static_cast<std::uint32_t>(dev.index);
  }()};
  return d;
}

Device unpack(std::uint32_t v) {
  return Device{static_cast<DeviceType>(v >> 16), static_cast<int>(v & 0xffffu)};
}

}  // namespace

std::string to_string(Device device) {
  if (device.type == DeviceType::cpu) return "cpu";
  return std::string(type_name(device.type)) + ":" + std::to_string(device.index);
}

Device parse_device(const std::string& text) {
  const std::size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  Device d;
  if (kind == "cpu") d.type = DeviceType::cpu;
  else if (kind == "devsim") d.type = DeviceType::devsim;
  else if (kind == "cuda") d.type = DeviceType::cuda;
  else MIXPREC_CHECK(false, ValueError, "parse_device",
                     "'" << text << "' is not a device; use cpu, cuda, cuda:N, devsim or devsim:N");
  if (colon != std::string::npos) {
    const std::string idx = text.substr(colon + 1);
    char* end = nullptr;
    const long n = std::strtol(idx.c_str(), &end, 10);
    MIXPREC_CHECK(!idx.empty() && *end == '\0' && n >= 0 && n < 65536 && d.type != DeviceType::cpu,
                  ValueError, "parse_device",
                  "'" << text << "' is not a device; use cpu, cuda, cuda:N, devsim or devsim:N");
    d.index = static_cast<int>(n);
  }
  return d;
}

Device current_device() { return unpack(packed().load(std::memory_order_relaxed)); }

Device set_current_device(Device device) {
  const std::uint32_t v =
      static_cast<std::uint32_t>(device.type) << 16 | static_cast<std::uint32_t>(device.index);
  return unpack(packed().exchange(v));
}

}  // namespace mixprec
