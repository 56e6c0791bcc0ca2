#include "core/deferred_checks.h"

#include <exception>
#include <utility>

namespace mixprec::detail {

std::int64_t* DeferredChecks::claim(Raise raise) { return claim_into(pending_, std::move(raise)); }

std::int64_t* DeferredChecks::claim_persistent(Raise raise) {
  return claim_into(persistent_, std::move(raise));
}

std::int64_t* DeferredChecks::claim_into(std::vector<Pending>& list, Raise raise) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t i = free_slot();
  if (i == kSlots) return nullptr;
  list.push_back({i, std::move(raise)});
  return slots_ + 2 * i;
}

void DeferredChecks::release_persistent(const std::int64_t* slot) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = persistent_.begin(); it != persistent_.end(); ++it) {
    if (slots_ + 2 * it->slot != slot) continue;
    used_[it->slot] = false;
    persistent_.erase(it);
    return;
  }
}

std::size_t DeferredChecks::free_slot() {
  for (std::size_t i = 0; i < kSlots; ++i) {
    if (used_[i]) continue;
    used_[i] = true;
    slots_[2 * i] = -1;
    slots_[2 * i + 1] = 0;
    return i;
  }
  return kSlots;
}

void DeferredChecks::settle() {
  std::vector<Pending> due;
  std::vector<Pending> standing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    due.swap(pending_);
    standing = persistent_;  // raised, never freed here
  }
  std::exception_ptr first;
  for (const std::vector<Pending>* checks : {&standing, &due}) {
    for (const Pending& p : *checks) {
      try {
        p.raise(slots_ + 2 * p.slot);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
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
