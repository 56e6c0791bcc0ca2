#include "runtime/weight_copies.h"

#include <mutex>
#include <unordered_map>

namespace mixprec::amp::detail {
namespace {

struct Entry {
  std::weak_ptr<mixprec::detail::TensorImpl> source;  // detects a freed address reused
  std::uint64_t version = 0;
  Tensor value;
};

struct Store {
  std::mutex mu;
  std::unordered_map<const mixprec::detail::TensorImpl*, Entry> entries;
};

Store& store() {
  static Store* s = new Store;  // never destroyed: tensors may be released after main returns
  return *s;
}

// The live entry of param, or null (an entry whose parameter died is dropped).
Entry* find(Store& s, const Tensor& param) {
  auto it = s.entries.find(param.impl_ptr().get());
  if (it == s.entries.end()) return nullptr;
  if (it->second.source.lock() != param.impl_ptr()) {
    s.entries.erase(it);
    return nullptr;
  }
  return &it->second;
}

}  // namespace

Tensor current_weight_copy(const Tensor& param, DType dtype) {
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  const Entry* e = find(s, param);
  if (e == nullptr || e->version != param.version() || e->value.dtype() != dtype) return Tensor();
  return e->value;
}

void publish_weight_copy(const Tensor& param, const Tensor& copy) {
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto it = s.entries.begin(); it != s.entries.end();) {
    it = it->second.source.expired() ? s.entries.erase(it) : std::next(it);
  }
  s.entries[param.impl_ptr().get()] = Entry{param.impl_ptr(), param.version(), copy};
}

Tensor writable_weight_copy(const Tensor& param) {
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  const Entry* e = find(s, param);
  // Sole owner: the store's Tensor is the only handle, so nothing can observe the write.
  if (e == nullptr || e->value.impl_ptr().use_count() != 1 ||
      e->value.impl_ptr()->storage.use_count() != 1 || !e->value.is_contiguous() ||
      e->value.numel() != param.numel()) {
    return Tensor();
  }
  return e->value;
}

void mark_weight_copy_current(const Tensor& param) {
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  if (Entry* e = find(s, param)) e->version = param.version();
}

void clear_weight_copies() {
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  s.entries.clear();
}

}  // namespace mixprec::amp::detail
