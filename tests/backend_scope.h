#pragma once
// A test's scope on one kernel backend.
#include <string>

#include "kernels/backend.h"

namespace mixprec::testing {

/// Selects a kernel backend for the scope (every thread's kernels use it); restores the
/// previous one at its end. By name, the current device follows the backend
/// (kernels::set_backend(name)); by table (a test's own Backend), the device stays as it is.
class BackendScope {
 public:
  explicit BackendScope(const char* name) : saved_name_(kernels::set_backend(name)) {}
  explicit BackendScope(const kernels::Backend& table) : saved_table_(&kernels::set_backend(table)) {}
  ~BackendScope() {
    if (saved_table_ != nullptr) {
      kernels::set_backend(*saved_table_);
    } else {
      kernels::set_backend(saved_name_);
    }
  }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  std::string saved_name_;
  const kernels::Backend* saved_table_ = nullptr;
};

}  // namespace mixprec::testing
