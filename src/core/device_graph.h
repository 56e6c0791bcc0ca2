#pragma once
// Capture and replay of the work one host thread queues on the device: a CUDA graph on cuda,
// and on devsim a recording of the kernel calls and device copies under the same rules, so a
// machine without a GPU checks what a graph of a training step needs (train/step_graphs.h).
//
// The rules a capture enforces, as CUDA's global capture mode does:
//   - nothing runs while capturing: kernels and device copies are recorded, and run at replay
//     with the arguments they were captured with (device addresses and host scalars alike);
//   - no host transfer and no synchronisation inside (a CUDA graph cannot wait for the host):
//     they throw StateError naming the transfer's reason, before the runtime sees them (a
//     runtime call that breaks a cuda capture otherwise is named by finish());
//   - every Storage the capturing thread allocates comes from the capture's private pool
//     (core/memory_pool.h), whose blocks no other tensor gets while the graph lives;
//   - other threads' transfers to the device wait until the capture is closed, so the data
//     loader's uploads never enter it;
//   - an op whose kernels take a value the host draws per call (dropout's seed) refuses the
//     capture (note_capture_refusal): a replay would repeat it.
// One capture at a time in the process.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/device.h"

namespace mixprec::detail {

class MemoryPool;

/// One call recorded on devsim: runs the kernel (or copy) at replay.
using RecordedCall = std::function<void()>;

/// A captured graph. Holds its memory pool: the addresses it writes stay reserved until it and
/// every tensor of the pool are gone.
class DeviceGraph {
 public:
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  /// Queues the captured work again on the device's stream (devsim: runs it now).
  void replay();
  /// Kernel launches and copies in the graph.
  std::size_t nodes() const { return nodes_; }
  Device device() const { return device_; }
  const std::shared_ptr<MemoryPool>& pool() const { return pool_; }

 private:
  friend class GraphCapture;
  DeviceGraph() = default;
  Device device_;
  std::shared_ptr<MemoryPool> pool_;
  std::size_t nodes_ = 0;
  std::vector<RecordedCall> calls_;        // devsim
  void* exec_ = nullptr;                   // cuda: cudaGraphExec_t
  std::vector<std::int64_t*> check_slots_; // cuda: deferred checks its kernels write
};

/// Opens a capture of the current device's stream for this thread (cuda or devsim: ValueError
/// naming the device otherwise; StateError if one is open already). Every device's work before
/// is finished first (synchronize), so its errors surface outside.
class GraphCapture {
 public:
  /// pool: the private pool to allocate from (several graphs that replay one after the other,
  /// never interleaved, may share one: a block one graph frees serves another's capture, as
  /// PyTorch's shared graph pools); null: a new pool of this capture's own. ValueError if the
  /// pool is another device's.
  explicit GraphCapture(std::shared_ptr<MemoryPool> pool = nullptr);
  /// Ends a capture that was not finished (the step threw) and discards it.
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  /// Closes the capture: the graph, or StateError naming the first failure inside (the CUDA
  /// call or transfer, the refusing op).
  std::unique_ptr<DeviceGraph> finish();

 private:
  bool open_ = false;
};

/// An eager run that notes what would break a capture, without capturing: on its thread, a
/// host transfer or synchronise on the device, a devsim kernel that returns a value to the host,
/// and every note_capture_refusal are recorded (the first is kept) and the work runs as usual.
/// A step rehearses before it is captured, so a step that cannot be captured is known before
/// the capture changes anything (a failed capture runs the ops' host code, such as dropout's
/// call counter, once more). Nests: the innermost rehearsal records.
class CaptureRehearsal {
 public:
  CaptureRehearsal();
  ~CaptureRehearsal();
  CaptureRehearsal(const CaptureRehearsal&) = delete;
  CaptureRehearsal& operator=(const CaptureRehearsal&) = delete;
  /// The first thing that would have broken a capture, or "".
  const std::string& failure() const { return failure_; }

 private:
  friend void note_capture_refusal(const std::string& why);
  friend bool capture_takes(Device, const char*, bool, const RecordedCall&);
  std::string failure_;
  CaptureRehearsal* previous_;
};

// --- Hooks for the code a capture watches. ---

/// The pool of this thread's open capture when it captures `device`, else null (Storage).
std::shared_ptr<MemoryPool> capture_pool(Device device);
/// Whether any capture is open in the process or this thread rehearses one: one atomic and one
/// thread-local load, which the hot paths (every device copy, memset and host-returning devsim
/// kernel) ask before they build what capture_takes or note_capture_refusal take.
bool capture_watched();
/// Where the devsim backend appends its calls while this thread captures on devsim; else null.
std::vector<RecordedCall>* devsim_recording();
/// Whether this thread has a capture open.
bool capturing();
/// What a transfer to `device` does about an open capture (transfer.cpp), before it runs:
///  - on another thread than the capturing one: waits until the capture is closed;
///  - on the capturing thread: an upload, download or synchronise (not `recordable`) throws
///    StateError (`what`, with the transfer's reason); on devsim a device copy or memset
///    (`recordable`) is appended to the recording as `run` and true returned (the caller does
///    not run it);
///  - otherwise false: the caller runs the transfer (on cuda the runtime captures a copy); in a
///    rehearsal an upload, download or synchronise is noted there first.
bool capture_takes(Device device, const char* what, bool recordable, const RecordedCall& run);
/// Fails this thread's open capture, if any, with `why` (the first failure is kept); the op
/// goes on, its work is recorded but the graph will not be made. In a rehearsal, noted there.
void note_capture_refusal(const std::string& why);

}  // namespace mixprec::detail
