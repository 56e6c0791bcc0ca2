#include "runtime/weight_copies.h"

#include <mutex>
#include <unordered_map>

namespace mixprec::runtime {

struct WeightCopies::Impl {
  struct Entry {
    std::weak_ptr<mixprec::detail::TensorImpl> source;  // detects a freed address reused
    std::uint64_t version = 0;
    Tensor value;
  };

  std::mutex mu;
  std::unordered_map<const mixprec::detail::TensorImpl*, Entry> entries;

  // The live entry of param, or null (an entry whose parameter died is dropped).
  Entry* find(const Tensor& param) {
    auto it = entries.find(param.impl_ptr().get());
    if (it == entries.end()) return nullptr;
    if (it->second.source.lock() != param.impl_ptr()) {
      entries.erase(it);
      return nullptr;
    }
    return &it->second;
  }
};

WeightCopies::WeightCopies() : impl_(std::make_unique<Impl>()) {}
WeightCopies::~WeightCopies() = default;

Tensor WeightCopies::current(const Tensor& param, DType dtype) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Impl::Entry* e = impl_->find(param);
  if (e == nullptr || e->version != param.version() || e->value.dtype() != dtype) return Tensor();
  return e->value;
}

void WeightCopies::publish(const Tensor& param, const Tensor& copy) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& entries = impl_->entries;
  for (auto it = entries.begin(); it != entries.end();) {
    it = it->second.source.expired() ? entries.erase(it) : std::next(it);
  }
  entries[param.impl_ptr().get()] = Impl::Entry{param.impl_ptr(), param.version(), copy};
}

Tensor WeightCopies::writable(const Tensor& param) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Impl::Entry* e = impl_->find(param);
  // Sole owner: the store's Tensor is the only handle, so nothing can observe the write.
  if (e == nullptr || e->value.impl_ptr().use_count() != 1 ||
      e->value.impl_ptr()->storage.use_count() != 1 || !e->value.is_contiguous() ||
      e->value.numel() != param.numel()) {
    return Tensor();
  }
  return e->value;
}

void WeightCopies::mark_current(const Tensor& param) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (Impl::Entry* e = impl_->find(param)) e->version = param.version();
}

void WeightCopies::clear() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->entries.clear();
}

WeightCopies& WeightCopies::process_default() {
  static WeightCopies* s = new WeightCopies;  // never destroyed: tensors may be released after main returns
  return *s;
}

namespace {
thread_local WeightCopies* tls_lent = nullptr;  // the innermost UseWeightCopies's store
}  // namespace

UseWeightCopies::UseWeightCopies(WeightCopies& copies) noexcept : previous_(tls_lent) {
  tls_lent = &copies;
}
UseWeightCopies::~UseWeightCopies() { tls_lent = previous_; }

WeightCopies& weight_copies() {
  return tls_lent != nullptr ? *tls_lent : WeightCopies::process_default();
}

namespace detail {

Tensor current_weight_copy(const Tensor& param, DType dtype) {
  return weight_copies().current(param, dtype);
}
void publish_weight_copy(const Tensor& param, const Tensor& copy) {
  weight_copies().publish(param, copy);
}
Tensor writable_weight_copy(const Tensor& param) { return weight_copies().writable(param); }
void mark_weight_copy_current(const Tensor& param) { weight_copies().mark_current(param); }
void clear_weight_copies() { weight_copies().clear(); }

}  // namespace detail
}  // namespace mixprec::runtime
