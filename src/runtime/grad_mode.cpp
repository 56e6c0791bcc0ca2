#include "mixprec/runtime/node.h"

namespace mixprec::runtime {
namespace {
thread_local bool tls_grad_enabled = true;
}

GradModeGuard::GradModeGuard(bool enabled) : previous_(tls_grad_enabled) {
  tls_grad_enabled = enabled;
}
GradModeGuard::~GradModeGuard() { tls_grad_enabled = previous_; }

bool grad_enabled() noexcept { return tls_grad_enabled; }

}  // namespace mixprec::runtime
