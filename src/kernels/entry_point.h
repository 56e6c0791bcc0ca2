#pragma once
/// How a kernel is reached. Each family header (elementwise.h, norm.h, ...) declares its
/// kernels once, as the specification in namespace ref (the contract and the one written
/// signature), lists their names (MIXPREC_<FAMILY>_KERNELS) and expands
/// MIXPREC_ENTRY_POINT over the list, which generates, per kernel `k`:
///   - kernels::k, an EntryPoint object whose call operator takes exactly ref::k's parameters
///     and forwards to the active backend (backend.cpp), or, where that backend leaves k empty
///     or does not support the call's dtypes, to its fallback: one mechanism, logged by
///     MIXPREC_VERBOSE, or one BackendError naming the kernel, dtypes and backend;
///   - the declaration of cpu::k with ref::k's type (the cpu backend defines those it has).
/// A backend's table (kernels/backend.h) has one field per kernel of the same type.
#include <cstddef>

namespace mixprec::kernels {

/// A string literal as a template argument: the kernel's name.
template <std::size_t N>
struct EntryName {
  char text[N];
  constexpr EntryName(const char (&s)[N]) {  // NOLINT(google-explicit-constructor)
    for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
  }
};

/// kernels::<Name>: forwards a call with Signature's parameters to the active backend.
template <EntryName Name, class Signature>
struct EntryPoint;
template <EntryName Name, class R, class... P>
struct EntryPoint<Name, R(P...)> {
  /// Defined in backend.cpp, explicitly instantiated there for every kernel of the list.
  R operator()(P... args) const;
};

/// (cpu::k is declared first: declared after kernels::k, it would shadow it.) The .cu files
/// implement kernels and never call entry points, and nvcc's front end does not match
/// EntryPoint's partial specialisation on a string: under nvcc only the declarations remain.
#if defined(__CUDACC__)
#define MIXPREC_ENTRY_POINT(entry) \
  namespace cpu {                  \
  decltype(ref::entry) entry;      \
  }
#else
#define MIXPREC_ENTRY_POINT(entry)                                       \
  namespace cpu {                                                        \
  decltype(ref::entry) entry;                                            \
  }                                                                      \
  inline constexpr EntryPoint<#entry, decltype(ref::entry)> entry{};
#endif

}  // namespace mixprec::kernels
