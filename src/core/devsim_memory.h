#pragma once
// The simulated device's addresses: a host block with one address bit set that makes the host
// fault on any dereference. On x86-64, bit 62 makes the address non-canonical (a general
// protection fault, whatever the paging mode); on arm64, whose top byte is ignored by loads
// (TBI), bit 55 instead selects the kernel half of the address space (a translation fault).
// Pointer arithmetic on a tagged address keeps the tag, so a kernel given `base + offset`
// translates it back with one mask.
#include <cstdint>

namespace mixprec::detail {

#if defined(__aarch64__)
inline constexpr std::uintptr_t kDevsimTag = std::uintptr_t{1} << 55;
#else
inline constexpr std::uintptr_t kDevsimTag = std::uintptr_t{1} << 62;
#endif

inline bool is_devsim_address(const void* p) noexcept {
  return (reinterpret_cast<std::uintptr_t>(p) & kDevsimTag) != 0;
}
inline void* devsim_tag(void* host) noexcept {
  return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(host) | kDevsimTag);
}
template <class T>
T* devsim_untag(T* device) noexcept {
  return reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(device) & ~kDevsimTag);
}

}  // namespace mixprec::detail
