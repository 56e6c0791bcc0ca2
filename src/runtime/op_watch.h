#pragma once
// A watch on the ops a thread runs, for diagnostics that must name the op during which
// something went wrong without profiling it (the CUDA-graph capture probe, train/capture_probe.h:
// which op's call broke the capture). While an OpWatch lives on a thread, every op scope opened
// on that thread (runtime/op_scope.h: every public op, node backward, cast and optimizer step,
// profiled or not) asks healthy() when it opens and when it closes, and the watch keeps the
// first place where the answer was false, and the innermost op an exception left. Off (no watch
// and no profile anywhere) it costs the ops nothing: it rides on the profiler's session count.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace mixprec::runtime::detail {

class OpScope;

class OpWatch {
 public:
  /// healthy: asked at every op scope's opening and closing on this thread; must not throw. One
  /// watch per thread at a time (StateError otherwise).
  explicit OpWatch(std::function<bool()> healthy);
  ~OpWatch();
  OpWatch(const OpWatch&) = delete;
  OpWatch& operator=(const OpWatch&) = delete;

  /// "" while healthy() held at every check; else where it first failed, as the two checks
  /// around it: e.g. "after closing linear (backward > LinearBackward), on opening cast
  /// (backward > MulBackward)" (the ops open at each, outermost first; "the start of the watch"
  /// for the first check).
  const std::string& first_unhealthy() const { return first_unhealthy_; }
  /// The ops open where the first exception that unwound an op scope was thrown (innermost
  /// last, e.g. "forward > linear"), or "".
  const std::string& thrown_in() const { return thrown_in_; }
  /// The ops open now, outermost first, joined by " > " ("" when none).
  std::string open_ops() const;

 private:
  friend class OpScope;
  void enter(const char* name);
  void leave() noexcept;
  void check(const char* event, const char* name) noexcept;

  struct Open {
    const char* name;
    int uncaught;  // std::uncaught_exceptions() when it opened
  };
  std::function<bool()> healthy_;
  std::vector<Open> open_;
  std::string last_healthy_ = "the start of the watch";
  std::string first_unhealthy_;
  std::string thrown_in_;
};

/// This thread's watch, or null.
OpWatch* current_op_watch() noexcept;

}  // namespace mixprec::runtime::detail
