#include "mixprec/core/verbose.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace mixprec {
namespace {
std::atomic<bool>& flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("MIXPREC_VERBOSE");
    return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
  }()};
  return on;
}
}  // namespace

bool verbose_enabled() noexcept { return flag().load(std::memory_order_relaxed); }
void set_verbose(bool on) noexcept { flag().store(on, std::memory_order_relaxed); }

void verbose_log(std::string_view op, std::string_view dtype, std::string_view impl,
                 std::string_view skipped) {
  std::string line = "mixprec: ";
  line.append(op).append(" ").append(dtype).append(": ran ").append(impl);
  if (!skipped.empty()) line.append("; skipped: ").append(skipped);
  line += '\n';
  static std::mutex mu;  // one whole line at a time even from several threads
  std::lock_guard<std::mutex> lock(mu);
  std::fputs(line.c_str(), stderr);
}

}  // namespace mixprec
