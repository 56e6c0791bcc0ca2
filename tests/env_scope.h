#pragma once
// A test's scope with one environment variable set (or unset), for the settings read from the
// environment at each call (MIXPREC_PEAKS_FILE, XDG_CACHE_HOME, HOME).
#include <cstdlib>
#include <optional>
#include <string>

namespace mixprec::testing {

/// Sets name to value (unsets it for nullopt) for the scope; puts back what was there at its end.
class EnvScope {
 public:
  EnvScope(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~EnvScope() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace mixprec::testing
