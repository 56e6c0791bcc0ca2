// OpWatch: op scopes report their opening and closing to the thread's watch (op_scope.h).
#include "runtime/op_watch.h"

#include <exception>

#include "mixprec/core/error.h"
#include "runtime/op_scope.h"

namespace mixprec::runtime::detail {
namespace {
thread_local OpWatch* tls_watch = nullptr;
}  // namespace

OpWatch* current_op_watch() noexcept { return tls_watch; }

OpWatch::OpWatch(std::function<bool()> healthy) : healthy_(std::move(healthy)) {
  MIXPREC_CHECK(tls_watch == nullptr, StateError, "OpWatch",
                "this thread already has an op watch; end it before starting another");
  tls_watch = this;
  // The profiler's count of listeners: non-zero, every op scope calls OpScope::begin, which
  // reports to this watch (and records only on threads with a Profile session).
  g_sessions.fetch_add(1, std::memory_order_relaxed);
}

OpWatch::~OpWatch() {
  g_sessions.fetch_sub(1, std::memory_order_relaxed);
  tls_watch = nullptr;
}

std::string OpWatch::open_ops() const {
  std::string out;
  for (const Open& o : open_) out += (out.empty() ? "" : " > ") + std::string(o.name);
  return out;
}

void OpWatch::check(const char* event, const char* name) noexcept {
  if (!first_unhealthy_.empty()) return;
  try {
    const std::string here = std::string(event) + " " + name + " (" + open_ops() + ")";
    if (healthy_()) {
      last_healthy_ = here;
    } else {
      first_unhealthy_ = "after " + last_healthy_ + ", on " + here;
    }
  } catch (...) {
    // A diagnostic only: out of memory for its strings leaves it silent.
  }
}

void OpWatch::enter(const char* name) {
  open_.push_back({name, std::uncaught_exceptions()});
  check("opening", name);
}

void OpWatch::leave() noexcept {
  if (open_.empty()) return;
  const Open top = open_.back();
  if (thrown_in_.empty() && std::uncaught_exceptions() > top.uncaught) {
    try {
      thrown_in_ = open_ops();
    } catch (...) {
    }
  }
  check("closing", top.name);
  open_.pop_back();
}

}  // namespace mixprec::runtime::detail
