#include "core/deferred_checks.h"

#include <exception>
#include <utility>

namespace mixprec::detail {

std::int64_t* DeferredChecks::claim(Raise raise) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i < kSlots; ++i) {
    if (used_[i]) continue;
    used_[i] = true;
    slots_[2 * i] = -1;
    slots_[2 * i + 1] = 0;
    pending_.push_back({i, std::move(raise)});
    return slots_ + 2 * i;
  }
  return nullptr;
}

void DeferredChecks::settle() {
  std::vector<Pending> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    due.swap(pending_);
  }
  std::exception_ptr first;
  for (const Pending& p : due) {
    try {
      p.raise(slots_ + 2 * p.slot);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Pending& p : due) used_[p.slot] = false;
  }
  if (first) std::rethrow_exception(first);
}

std::size_t DeferredChecks::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

}  // namespace mixprec::detail
