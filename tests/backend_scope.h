#pragma once
// A test's scope on one kernel backend.
#include <string>

#include "kernels/backend.h"

namespace mixprec::testing {

/// Selects a kernel backend for the scope (every thread's kernels use it); restores the
/// previous one at its end.
class BackendScope {
 public:
  explicit BackendScope(const char* name) : saved_(kernels::set_backend(name)) {}
  ~BackendScope() { kernels::set_backend(saved_); }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  std::string saved_;
};

}  // namespace mixprec::testing
