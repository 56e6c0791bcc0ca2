#pragma once
// Checks whose verdict a device kernel writes into host-visible memory, raised at the host's
// next synchronisation with the device rather than at a synchronisation of their own. A check
// that downloaded its verdict would stall the step once per call: the cross-entropy target
// check did so twice per training step on the first GPU run, against the budget of two
// host reads per step (the loss for the log and found-inf). Deferred, its error surfaces at the
// step's next read, naming the same op and bad value; the kernels it guards must therefore not
// read out of bounds on a bad value (the cross-entropy kernels don't). Whichever thread
// synchronises next settles every pending check, so with several host threads the error may
// surface in another thread than the one whose call failed (a step has one: its loss read).
// On cuda the synchronisation is with the backend's one stream (core/cuda_runtime.h), which
// every kernel that writes a slot runs on: once the stream has caught up, every verdict queued
// before is in host memory (mapped memory needs no copy), and a slot is only claimed again after
// it was settled, so no kernel can still be writing it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace mixprec::detail {

class DeferredChecks {
 public:
  static constexpr std::size_t kSlots = 64;
  /// Called with its slot's two values after a synchronisation; throws if they say so.
  using Raise = std::function<void(const std::int64_t* verdict)>;

  /// slots: kSlots x 2 int64 of host memory the device writes (mapped pinned memory on cuda).
  explicit DeferredChecks(std::int64_t* slots) : slots_(slots) {}

  /// A free slot, set to {-1, 0} (the kernel writes it only on a failed check), with raise
  /// registered for the next settle(); null when every slot is pending (synchronise and settle
  /// first).
  std::int64_t* claim(Raise raise);
  /// A slot for a check inside a captured graph (core/device_graph.h): the kernel that writes it
  /// is replayed again and again, so the slot is never freed by settle(); every settle() raises
  /// it instead, until release_persistent(). Its kernel writes only on a failed check, so the
  /// slot needs no reset between replays (a failure ends the run). Null when every slot is taken.
  std::int64_t* claim_persistent(Raise raise);
  /// Frees a slot of claim_persistent (the graph that wrote it is gone).
  void release_persistent(const std::int64_t* slot);
  /// After a synchronisation: runs the pending checks' raise in claim order and frees their
  /// slots; the first error is rethrown once every slot is free.
  void settle();
  std::size_t pending() const;

 private:
  std::size_t free_slot();  // caller holds mu_; marks it used and resets it; kSlots if none
  struct Pending {
    std::size_t slot;
    Raise raise;
  };
  std::int64_t* slots_;
  mutable std::mutex mu_;
  std::int64_t* claim_into(std::vector<Pending>& list, Raise raise);  // a free slot into list
  std::vector<Pending> pending_;
  std::vector<Pending> persistent_;
  bool used_[kSlots] = {};
};

}  // namespace mixprec::detail
