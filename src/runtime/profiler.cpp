// The per-op profiler: the thread's recorder, the scopes' bookkeeping (folding nested ops,
// exclusive time), and the "could run lower" provenance analysis.
#include "mixprec/runtime/profiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "core/device_clock.h"
#include "runtime/op_scope.h"
#include "runtime/op_watch.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec::runtime {

const char* name(Phase phase) {
  switch (phase) {
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::optimizer: return "optimizer";
    case Phase::cast: return "cast";
  }
  return "?";
}

namespace detail {

using mixprec::detail::DeviceClock;

std::atomic<int> g_sessions{0};

namespace {

// Row key; `reason` is empty for the op table and set for "could run lower" entries.
struct Key {
  std::string op;
  Phase phase;
  DType dtype;
  std::string reason;
};
struct KeyView {
  std::string_view op;
  Phase phase;
  DType dtype;
  std::string_view reason;
};
auto tie(const Key& k) { return std::tie(k.op, k.phase, k.dtype, k.reason); }
auto tie(const KeyView& k) { return std::tie(k.op, k.phase, k.dtype, k.reason); }
struct KeyLess {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    const auto ta = tie(a);
    const auto tb = tie(b);
    return std::tuple<std::string_view, Phase, DType, std::string_view>(ta) <
           std::tuple<std::string_view, Phase, DType, std::string_view>(tb);
  }
};

struct Row {
  std::uint64_t count = 0, ns = 0;
  double flops = 0, bytes = 0;
};

using RowMap = std::map<Key, Row, KeyLess>;

Row& row_of(RowMap& rows, const KeyView& k) {
  auto it = rows.find(k);
  if (it == rows.end()) {
    it = rows.emplace(Key{std::string(k.op), k.phase, k.dtype, std::string(k.reason)}, Row{}).first;
  }
  return it->second;
}

// Where an f32 tensor came from, for the pass-through rule. The weak pointer both detects a freed
// tensor and keeps its address from being reused while the entry exists.
struct TensorOrigin {
  std::weak_ptr<mixprec::detail::TensorImpl> tensor;
  std::string producer;
  bool expired() const { return tensor.expired(); }
};
struct NodeOrigin {
  std::weak_ptr<runtime::Node> node;
  std::string reason;
  bool expired() const { return node.expired(); }
};

template <class Map>
void prune(Map& map, std::size_t& prune_at) {
  if (map.size() < prune_at) return;
  std::erase_if(map, [](const auto& entry) { return entry.second.expired(); });
  prune_at = std::max<std::size_t>(4096, 2 * map.size());
}

}  // namespace

/// A recorded scope's interval in the device's queue, timed when the clock settles.
struct TimedScope {
  DeviceClock::Mark start = 0, end = 0;
  std::int32_t parent = -1;   // the nearest recorded ancestor's entry: its self time excludes ours
  bool ended = false;
  Row* row = nullptr;         // the op table's row
  Row* candidate = nullptr;   // the "could run lower" row, if the scope is one
};

struct Recorder {
  explicit Recorder(Device device) : clock(device) {}

  /// How many timed scopes wait before a top-level scope settles them (on a GPU, one wait for
  /// the device every 64k recorded scopes instead of one per op).
  static constexpr std::size_t kSettleEvery = std::size_t{1} << 16;

  OpScope* top = nullptr;
  Phase phase = Phase::forward;
  RowMap rows;
  RowMap candidates;
  std::unordered_map<const void*, TensorOrigin> tensors;
  std::unordered_map<const void*, NodeOrigin> nodes;
  std::size_t tensors_prune_at = 4096, nodes_prune_at = 4096;
  DeviceClock clock;
  std::vector<TimedScope> timed;

  /// Waits for the device to pass every mark and adds each finished scope's self time (its
  /// interval less its recorded children's) to its rows. Only with no scope open.
  void settle() {
    if (timed.empty()) return;
    const std::vector<std::uint64_t> t = clock.settle();
    std::vector<std::int64_t> self(timed.size());
    for (std::size_t i = 0; i < timed.size(); ++i) {
      const TimedScope& e = timed[i];
      if (!e.ended) continue;
      const std::int64_t elapsed = t[e.end] > t[e.start] ? static_cast<std::int64_t>(t[e.end] - t[e.start]) : 0;
      self[i] += elapsed;
      if (e.parent >= 0) self[static_cast<std::size_t>(e.parent)] -= elapsed;
    }
    for (std::size_t i = 0; i < timed.size(); ++i) {
      const TimedScope& e = timed[i];
      if (!e.ended) continue;
      const auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, self[i]));
      e.row->ns += ns;
      if (e.candidate != nullptr) e.candidate->ns += ns;
    }
    timed.clear();
  }

  void remember(const Tensor& out, std::string producer) {
    tensors[out.impl_ptr().get()] = TensorOrigin{out.impl_ptr(), std::move(producer)};
    prune(tensors, tensors_prune_at);
  }
  // The producer of t if it is an f32 tensor made by an fp32-policy or a "could run lower" op.
  const std::string* origin(const Tensor& t) const {
    if (!t.defined() || t.dtype() != DType::f32) return nullptr;
    const auto it = tensors.find(t.impl_ptr().get());
    if (it == tensors.end() || it->second.tensor.lock() != t.impl_ptr()) return nullptr;
    return &it->second.producer;
  }
};

namespace {

thread_local Recorder* tls_recorder = nullptr;

double bytes_of(const Tensor& t) { return t.defined() ? static_cast<double>(t.nbytes()) : 0.0; }

}  // namespace

void OpScope::begin(ScopeKind kind, const char* name, int policy_of) {
  if (OpWatch* w = current_op_watch()) [[unlikely]] {
    watched_ = true;
    w->enter(name);
  }
  Recorder* r = tls_recorder;
  if (r == nullptr) return;  // a session exists, but on another thread
  // The backward of a cast is a cast (dy.to(dtype)), recorded as such inside it: a node row
  // would only repeat its bytes.
  if (kind == ScopeKind::node && std::string_view(name) == "cast") return;
  rec_ = r;
  parent_ = r->top;
  r->top = this;
  name_ = name;
  policy_of_ = policy_of;
  kind_ = kind;
  switch (kind) {
    case ScopeKind::op: phase_ = r->phase; break;
    case ScopeKind::cast: phase_ = Phase::cast; break;
    case ScopeKind::node: phase_ = Phase::backward; break;
    case ScopeKind::optimizer: phase_ = Phase::optimizer; break;
  }
  recorded_ = kind == ScopeKind::cast || parent_ == nullptr;
  finished_ = false;
  reported_ = false;
  flops_ = bytes_ = child_flops_ = child_bytes_ = 0;
  entry_ = -1;
  if (!recorded_) return;
  if (parent_ == nullptr && r->timed.size() >= Recorder::kSettleEvery) r->settle();
  TimedScope e;
  for (OpScope* a = parent_; a != nullptr; a = a->parent_) {
    if (a->recorded_) {
      e.parent = a->entry_;
      break;
    }
  }
  e.start = r->clock.mark();
  entry_ = static_cast<std::int32_t>(r->timed.size());
  r->timed.push_back(e);
}

TimedScope* OpScope::timed() const {
  // Out of range only if the session was cleared while this scope was open.
  return entry_ >= 0 && static_cast<std::size_t>(entry_) < rec_->timed.size()
             ? &rec_->timed[static_cast<std::size_t>(entry_)]
             : nullptr;
}

void OpScope::end() noexcept {
  if (watched_) [[unlikely]] {
    if (OpWatch* w = current_op_watch()) w->leave();
  }
  // Scopes are RAII objects on the stack, so they close in reverse order of opening.
  if (rec_ != nullptr && rec_->top == this) rec_->top = parent_;
}

void OpScope::finish(DType dtype, double own_flops, double own_bytes) {
  if (finished_) return;
  finished_ = true;
  const double flops = (reported_ ? flops_ : own_flops) + child_flops_;
  const double bytes = (reported_ ? bytes_ : own_bytes) + child_bytes_;
  if (!recorded_) {
    if (parent_ != nullptr) {
      parent_->child_flops_ += flops;
      parent_->child_bytes_ += bytes;
    }
    return;
  }
  Row& row = row_of(rec_->rows, {name_, phase_, dtype, {}});
  ++row.count;
  row.flops += flops;
  row.bytes += bytes;
  // The time comes when the clock settles: on a GPU the op's kernels may not even have started.
  if (TimedScope* e = timed()) {
    e->end = rec_->clock.mark();
    e->ended = true;
    e->row = &row;
  }
}

void OpScope::analyse(const Tensor& out, const Tensor* const* ptrs, std::size_t n_ptr,
                      const Tensor* values, std::size_t n_values) {
  if (!recorded_ || kind_ != ScopeKind::op || policy_of_ < 0) return;
  // One-element results (a loss, a scale) gain nothing from 16 bits.
  if (!out.defined() || out.dtype() != DType::f32 || out.numel() <= 1) return;
  std::string reason;
  switch (runtime::policy_row(static_cast<runtime::OpKind>(policy_of_)).policy) {
    case runtime::CastPolicy::lower_precision:
      reason = runtime::autocast_enabled() ? "lower_precision op computed in f32 inside autocast"
                                       : "lower_precision op computed in f32 outside autocast";
      break;
    case runtime::CastPolicy::fp32_to_lower:  // its output is f32 only outside autocast
      reason = "fp32_to_lower op stored f32 outside autocast";
      break;
    case runtime::CastPolicy::pass_through: {
      const std::string* from = nullptr;
      for (std::size_t i = 0; i < n_ptr && from == nullptr; ++i) {
        if (ptrs[i] != nullptr) from = rec_->origin(*ptrs[i]);
      }
      for (std::size_t i = 0; i < n_values && from == nullptr; ++i) from = rec_->origin(values[i]);
      if (from != nullptr) reason = "pass_through op fed f32 by " + *from;
      break;
    }
    case runtime::CastPolicy::fp32:
      rec_->remember(out, std::string(name_) + " (fp32 policy)");
      return;
    case runtime::CastPolicy::promote:
      return;
  }
  if (reason.empty()) return;
  Row& row = row_of(rec_->candidates, {name_, phase_, DType::f32, reason});
  ++row.count;
  if (TimedScope* e = timed()) e->candidate = &row;
  rec_->remember(out, std::string("f32 ") + name_);
  if (const std::shared_ptr<runtime::Node>& node = out.grad_fn()) {
    rec_->nodes[node.get()] = NodeOrigin{node, "backward of " + std::string(name_) + ": " + reason};
    prune(rec_->nodes, rec_->nodes_prune_at);
  }
}

void OpScope::done_op(const Tensor& out, const Tensor* const* ptrs, std::size_t n_ptr,
                      const Tensor* values, std::size_t n_values, double flops) {
  double bytes = bytes_of(out);
  for (std::size_t i = 0; i < n_ptr; ++i) bytes += ptrs[i] != nullptr ? bytes_of(*ptrs[i]) : 0.0;
  for (std::size_t i = 0; i < n_values; ++i) bytes += bytes_of(values[i]);
  const double own_flops =
      flops == kElementwise ? (out.defined() ? static_cast<double>(out.numel()) : 0.0) : flops;
  finish(out.defined() ? out.dtype() : DType::f32, own_flops, bytes);
  analyse(out, ptrs, n_ptr, values, n_values);
}

void OpScope::done_composite_slow(const Tensor& out) {
  finish(out.defined() ? out.dtype() : DType::f32, 0.0, 0.0);
  analyse(out, nullptr, 0, nullptr, 0);
}

void OpScope::done_node_slow(const runtime::Node& node, const Tensor& grad,
                             const std::vector<Tensor>& input_grads) {
  // An input gradient that is a view of grad (add passes dy on, reshape reshapes it) moved no
  // bytes and cost no arithmetic; a node whose every gradient is such a view did no work.
  double written = 0, bytes = 0;
  for (const Tensor& g : input_grads) {
    if (!g.defined()) continue;
    if (grad.defined() && g.impl().storage == grad.impl().storage) continue;
    written += static_cast<double>(g.numel());
    bytes += bytes_of(g);
  }
  if (input_grads.empty()) {  // a leaf's accumulate_grad: reads grad, writes .grad
    written = grad.defined() ? static_cast<double>(grad.numel()) : 0.0;
    bytes = bytes_of(grad);
  }
  const double read = written > 0 && grad.defined() ? static_cast<double>(grad.numel()) : 0.0;
  if (written > 0) bytes += bytes_of(grad);
  finish(grad.defined() ? grad.dtype() : node.output_dtype, std::max(read, written), bytes);
  if (!recorded_) return;
  const auto it = rec_->nodes.find(&node);
  if (it == rec_->nodes.end() || it->second.node.lock().get() != &node) return;
  Row& row = row_of(rec_->candidates, {name_, phase_, grad.defined() ? grad.dtype() : node.output_dtype,
                                       it->second.reason});
  ++row.count;
  if (TimedScope* e = timed()) e->candidate = &row;
}

void OpScope::done_work_slow(DType dtype) { finish(dtype, 0.0, 0.0); }

void add_work_slow(double flops, double bytes) {
  Recorder* r = tls_recorder;
  if (r == nullptr || r->top == nullptr) return;
  r->top->flops_ += flops;
  r->top->bytes_ += bytes;
  r->top->reported_ = true;
}

void PhaseScope::begin(Phase phase) {
  Recorder* r = tls_recorder;
  if (r == nullptr) return;
  rec_ = r;
  saved_ = r->phase;
  r->phase = phase;
}

void PhaseScope::end() noexcept { rec_->phase = saved_; }

}  // namespace detail

struct Profile::Impl {
  detail::Recorder recorder{current_device()};
};

Profile::Profile() {
  MIXPREC_CHECK(detail::tls_recorder == nullptr, StateError, "Profile",
                "a profiling session is already recording on this thread; destroy it before "
                "starting another (sessions on other threads are independent)");
  impl_ = std::make_unique<Impl>();
  detail::tls_recorder = &impl_->recorder;
  detail::g_sessions.fetch_add(1, std::memory_order_relaxed);
}

Profile::~Profile() {
  if (detail::tls_recorder == &impl_->recorder) detail::tls_recorder = nullptr;
  detail::g_sessions.fetch_sub(1, std::memory_order_relaxed);
}

void Profile::clear() {
  detail::Recorder& r = impl_->recorder;
  r.settle();  // the marks' rows are about to go
  r.rows.clear();
  r.candidates.clear();
  r.tensors.clear();
  r.nodes.clear();
}

ProfileData Profile::data() const {
  detail::Recorder& r = impl_->recorder;
  // Scopes still open (data() called from inside an op) keep their marks for a later call.
  if (r.top == nullptr) r.settle();
  ProfileData d;
  for (const auto& [k, row] : r.rows) {
    d.ops.push_back({k.op, k.phase, k.dtype, row.count, row.ns, row.flops, row.bytes});
    d.recorded_ns += row.ns;
    if (k.phase == Phase::cast) {
      d.cast_count += row.count;
      d.cast_ns += row.ns;
    }
  }
  for (const auto& [k, row] : r.candidates) {
    d.could_run_lower.push_back({k.op, k.phase, k.dtype, k.reason, row.count, row.ns});
  }
  const auto by_time = [](const auto& a, const auto& b) { return a.self_ns > b.self_ns; };
  std::stable_sort(d.ops.begin(), d.ops.end(), by_time);
  std::stable_sort(d.could_run_lower.begin(), d.could_run_lower.end(), by_time);
  return d;
}

bool profiling() noexcept { return detail::tls_recorder != nullptr; }

}  // namespace mixprec::runtime
