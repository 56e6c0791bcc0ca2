#pragma once
// The profiler's hook: an RAII OpScope at the top of every public op, around every
// Node::backward in the engine, in cast() and around optimizer steps. Off (no Profile session in
// the process) a scope costs one relaxed load of a global counter and a predictable branch; the
// done*() calls and the destructor test a pointer that stays null.
//
// Accounting rules (docs/diagnostics.md):
//  - A scope opened while another non-cast scope is open on the thread is "folded": it keeps no
//    row and no clock; its FLOPs and bytes are added to its parent. So an op calling ops (mse_loss,
//    addmm, a node's backward calling mul) is one row, counted once.
//  - Cast scopes always get their own row (phase cast); their wall time is subtracted from the
//    nearest recorded ancestor, whose time is thus exclusive (self) time.
//  - Work (FLOPs, bytes) is what kernel call sites report with add_work() if any did (GEMMs,
//    convolutions, optimizer updates), else the formula the scope's done() gives (element counts;
//    inputs read + output written), plus what folded children reported.
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "mixprec/runtime/op_policy.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/runtime/profiler.h"

namespace mixprec::runtime {
class Node;
}

namespace mixprec::runtime::detail {

/// Number of live Profile sessions in the process; the whole cost of the profiler when 0.
extern std::atomic<int> g_sessions;

struct Recorder;     // one per thread with a session (profiler.cpp)
struct TimedScope;   // a recorded scope's interval, timed when the device clock settles

/// What a scope measures.
enum class ScopeKind : std::uint8_t {
  op,         ///< a public op (phase forward, or backward when run by the engine outside a node)
  cast,       ///< cast(): always its own row, phase cast
  node,       ///< one Node::backward in the engine, phase backward
  optimizer,  ///< an optimizer step, unscale or clip, phase optimizer
};

/// Marker for done(): the op's FLOPs are its output's element count.
inline constexpr double kElementwise = -1.0;

class OpScope {
 public:
  /// A public op with an autocast policy row; its row is named after the OpKind.
  explicit OpScope(runtime::OpKind kind) {
    if (g_sessions.load(std::memory_order_relaxed) != 0) [[unlikely]] {
      begin(ScopeKind::op, runtime::name(kind), static_cast<int>(kind));
    }
  }
  /// Any other scope: name must stay valid until done() returns (a literal, a node's name()).
  /// policy_of: the OpKind whose autocast policy the op follows, if any.
  OpScope(ScopeKind kind, const char* name, int policy_of = -1) {
    if (g_sessions.load(std::memory_order_relaxed) != 0) [[unlikely]] begin(kind, name, policy_of);
  }
  ~OpScope() {
    if (rec_ != nullptr || watched_) [[unlikely]] end();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  /// True when this scope records (a session is on for this thread): guard costly bookkeeping.
  bool active() const noexcept { return rec_ != nullptr; }

  /// Records the op: output written, inputs read (undefined ones skipped), FLOPs (kElementwise:
  /// the output's element count) unless kernels reported work. dtype: the output's.
  void done(const Tensor& out, std::initializer_list<const Tensor*> inputs,
            double flops = kElementwise) {
    if (rec_ != nullptr) [[unlikely]] done_op(out, inputs.begin(), inputs.size(), nullptr, 0, flops);
  }
  /// done() for a variable number of inputs (cat).
  void done(const Tensor& out, const std::vector<Tensor>& inputs, double flops) {
    if (rec_ != nullptr) [[unlikely]] done_op(out, nullptr, 0, inputs.data(), inputs.size(), flops);
  }
  /// Records an op whose work is all done by the ops it calls (mse_loss, addmm, dropout, stack).
  void done_composite(const Tensor& out) {
    if (rec_ != nullptr) [[unlikely]] done_composite_slow(out);
  }
  /// Records a node's backward: reads grad (plus what kernels report), writes input_grads.
  void done_node(const runtime::Node& node, const Tensor& grad,
                 const std::vector<Tensor>& input_grads) {
    if (rec_ != nullptr) [[unlikely]] done_node_slow(node, grad, input_grads);
  }
  /// Records a scope whose work was all reported through add_work (optimizer steps).
  void done_work(DType dtype) {
    if (rec_ != nullptr) [[unlikely]] done_work_slow(dtype);
  }

 private:
  friend struct Recorder;
  friend void add_work_slow(double flops, double bytes);
  void begin(ScopeKind kind, const char* name, int policy_of);
  void end() noexcept;
  void done_op(const Tensor& out, const Tensor* const* inputs, std::size_t n_ptr,
               const Tensor* values, std::size_t n_values, double flops);
  void done_composite_slow(const Tensor& out);
  void done_node_slow(const runtime::Node& node, const Tensor& grad,
                      const std::vector<Tensor>& input_grads);
  void done_work_slow(DType dtype);
  // Adds the finished scope's row (if recorded) or folds its work into its parent.
  void finish(DType dtype, double own_flops, double own_bytes);
  // The "could run lower" rules for a recorded forward op (profiler.h, LowerPrecisionCandidate).
  void analyse(const Tensor& out, const Tensor* const* ptrs, std::size_t n_ptr,
               const Tensor* values, std::size_t n_values);

  // This recorded scope's interval in its recorder's list (profiler.cpp), or null.
  TimedScope* timed() const;
  Recorder* rec_ = nullptr;  // null: not profiling (set when off, with watched_)
  bool watched_ = false;     // reported to this thread's OpWatch (runtime/op_watch.h)
  OpScope* parent_;
  const char* name_;
  int policy_of_;
  ScopeKind kind_;
  Phase phase_;
  bool recorded_;   // false: folded into the parent
  bool finished_;
  bool reported_;   // add_work was called on this scope
  std::int32_t entry_;      // recorded: its index in the recorder's timed list
  double flops_, bytes_;    // reported through add_work and by folded children
  double child_flops_, child_bytes_;
};

void add_work_slow(double flops, double bytes);

/// Reports exact work of a kernel call to the innermost open scope on this thread (GEMMs:
/// 2*M*N*K FLOPs and the bytes of A, B, C). Replaces the scope's own formula.
inline void add_work(double flops, double bytes) {
  if (g_sessions.load(std::memory_order_relaxed) != 0) [[unlikely]] add_work_slow(flops, bytes);
}

/// Sets this thread's phase for op scopes (the engine runs under backward) until destroyed.
class PhaseScope {
 public:
  explicit PhaseScope(Phase phase) {
    if (g_sessions.load(std::memory_order_relaxed) != 0) [[unlikely]] begin(phase);
  }
  ~PhaseScope() {
    if (rec_ != nullptr) [[unlikely]] end();
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  void begin(Phase phase);
  void end() noexcept;
  Recorder* rec_ = nullptr;
  Phase saved_ = Phase::forward;
};

}  // namespace mixprec::runtime::detail
