// Capture and replay (core/device_graph.h). The process has at most one open capture; its state
// lives here, and the hooks (Storage's pool, the devsim backend's recording, the transfers'
// gate) ask it. CUDA calls go through gpu.cpp (core/cuda_runtime.h).
#include "core/device_graph.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "core/cuda_runtime.h"
#include "core/memory_pool.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec::detail {
namespace {

struct OpenCapture {
  Device device;
  std::thread::id owner;
  std::shared_ptr<MemoryPool> pool;
  std::vector<RecordedCall> calls;  // devsim
  std::string failure;              // the first refusal or failed transfer
};

std::mutex g_mu;
std::condition_variable g_closed;
OpenCapture* g_open = nullptr;  // guarded by g_mu; its fields are the owner thread's
// Whether g_open is set: the hooks run at every allocation, transfer and devsim kernel call, and
// a capture is rare, so they read this first and take no lock when it is false.
std::atomic<bool> g_any{false};

// This thread's capture, if it owns the open one (only the owner reads its fields).
OpenCapture* own_capture() {
  if (!g_any.load(std::memory_order_acquire)) return nullptr;
  const std::lock_guard<std::mutex> lock(g_mu);
  return g_open != nullptr && g_open->owner == std::this_thread::get_id() ? g_open : nullptr;
}

void note_failure(OpenCapture& c, const std::string& why) {
  if (c.failure.empty()) c.failure = why;
}

thread_local CaptureRehearsal* t_rehearsal = nullptr;

std::string transfer_failure(const char* what) {
  return std::string(what) + " (" + TransferReason::current() +
         ") inside the capture: a graph cannot wait for the host; move it before or after the "
         "captured region";
}

}  // namespace

DeviceGraph::~DeviceGraph() {
  if (device_.type == DeviceType::cuda) cuda_graph_destroy(exec_, check_slots_);
}

void DeviceGraph::replay() {
  if (device_.type == DeviceType::cuda) return cuda_graph_launch(exec_);
  for (const RecordedCall& call : calls_) call();
}

GraphCapture::GraphCapture(std::shared_ptr<MemoryPool> pool) {
  const Device device = current_device();
  MIXPREC_CHECK(device.type == DeviceType::cuda || device.type == DeviceType::devsim, ValueError,
                "graph capture",
                "captures work queued on a GPU (cuda) or its simulation (devsim); this run is on "
                    << to_string(device));
  synchronize(device);  // earlier work finishes, and raises its errors, outside the capture
  auto open = std::make_unique<OpenCapture>();
  open->device = device;
  open->owner = std::this_thread::get_id();
  MIXPREC_CHECK(pool == nullptr || pool->device() == device, ValueError, "graph capture",
                "the memory pool is " << to_string(pool->device()) << "'s, the capture "
                                      << to_string(device) << "'s");
  open->pool = pool ? std::move(pool) : std::make_shared<MemoryPool>(device);
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    MIXPREC_CHECK(g_open == nullptr, StateError, "graph capture",
                  "a capture is already open in this process (one at a time)");
    g_open = open.release();
    g_any.store(true, std::memory_order_release);
  }
  if (device.type == DeviceType::cuda) {
    try {
      cuda_capture_begin(/*thread_local_mode=*/true);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(g_mu);
      delete g_open;
      g_open = nullptr;
      g_any.store(false, std::memory_order_release);
      g_closed.notify_all();
      throw;
    }
  }
  open_ = true;
}

namespace {

// Takes the open capture out of the process state; other threads' transfers go on.
std::unique_ptr<OpenCapture> close_capture() {
  std::unique_ptr<OpenCapture> c;
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    c.reset(g_open);
    g_open = nullptr;
    g_any.store(false, std::memory_order_release);
  }
  g_closed.notify_all();
  return c;
}

}  // namespace

GraphCapture::~GraphCapture() {
  if (!open_) return;
  // The step threw inside: end the capture (CUDA requires it before the stream takes work) and
  // drop what it made.
  const OpenCapture* c = own_capture();
  void* exec = nullptr;
  if (c != nullptr && c->device.type == DeviceType::cuda) {
    try {
      (void)cuda_capture_end(&exec);
      if (exec != nullptr) cuda_graph_destroy(exec, {});
    } catch (...) {  // a destructor must not throw; the capture is gone either way
    }
  }
  (void)close_capture();
}

std::unique_ptr<DeviceGraph> GraphCapture::finish() {
  MIXPREC_CHECK(open_, StateError, "graph capture", "finish() called twice");
  open_ = false;
  OpenCapture* c = own_capture();
  MIXPREC_ASSERT(c != nullptr);
  std::unique_ptr<DeviceGraph> graph(new DeviceGraph());
  graph->device_ = c->device;
  graph->pool_ = c->pool;
  if (c->device.type == DeviceType::cuda) {
    CaptureEnd end;
    try {
      end = cuda_capture_end(&graph->exec_);
    } catch (...) {
      (void)close_capture();
      throw;
    }
    graph->check_slots_ = std::move(end.check_slots);
    graph->nodes_ = end.nodes;
    const std::unique_ptr<OpenCapture> closed = close_capture();
    // A refusal (an op with a host seed) fails the graph even when CUDA took every call.
    const std::string why = !closed->failure.empty()  ? closed->failure
                            : !end.first_failure.empty() ? end.first_failure
                            : !end.captured              ? end.error
                                                         : std::string();
    MIXPREC_CHECK(why.empty(), StateError, "graph capture", "not capturable: " << why);
    return graph;
  }
  const std::unique_ptr<OpenCapture> closed = close_capture();
  MIXPREC_CHECK(closed->failure.empty(), StateError, "graph capture",
                "not capturable: " << closed->failure);
  graph->calls_ = std::move(closed->calls);
  graph->nodes_ = graph->calls_.size();
  return graph;
}

std::shared_ptr<MemoryPool> capture_pool(Device device) {
  OpenCapture* c = own_capture();
  return c != nullptr && c->device == device ? c->pool : nullptr;
}

std::vector<RecordedCall>* devsim_recording() {
  OpenCapture* c = own_capture();
  return c != nullptr && c->device.type == DeviceType::devsim ? &c->calls : nullptr;
}

bool capturing() { return own_capture() != nullptr; }

bool capture_watched() {
  return t_rehearsal != nullptr || g_any.load(std::memory_order_acquire);
}

CaptureRehearsal::CaptureRehearsal() : previous_(t_rehearsal) { t_rehearsal = this; }
CaptureRehearsal::~CaptureRehearsal() { t_rehearsal = previous_; }

bool capture_takes(Device device, const char* what, bool recordable, const RecordedCall& run) {
  if (device.is_host()) return false;
  if (t_rehearsal != nullptr && !recordable && t_rehearsal->failure_.empty()) {
    t_rehearsal->failure_ = transfer_failure(what);
  }
  if (!g_any.load(std::memory_order_acquire)) return false;
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_open == nullptr) return false;
  if (g_open->owner != std::this_thread::get_id()) {
    g_closed.wait(lock, [] { return g_open == nullptr; });
    return false;
  }
  OpenCapture& c = *g_open;
  lock.unlock();
  if (recordable) {
    if (c.device.type != DeviceType::devsim || device.type != DeviceType::devsim) return false;
    c.calls.push_back(run);  // cuda: the runtime captures the copy
    return true;
  }
  // Refused before the runtime sees it, on cuda too: the message names the transfer's reason.
  const std::string why = transfer_failure(what);
  note_failure(c, why);
  throw_error<StateError>("graph capture", why);
}

void* cuda_scratch_acquire(std::size_t bytes, std::shared_ptr<void>& pool) {
  // (Only the cuda kernels ask; the pool is the current device's, devsim's in the tests.)
  std::shared_ptr<MemoryPool> capture = capture_pool(current_device());
  if (capture) {
    void* block = capture->acquire(bytes);
    pool = std::move(capture);
    return block;
  }
  pool.reset();
  return cuda_block_cache().acquire(bytes);
}

void cuda_scratch_release(void* block, std::size_t bytes, const std::shared_ptr<void>& pool) {
  if (block == nullptr) return;
  if (pool) return static_cast<MemoryPool*>(pool.get())->release(block, bytes);
  cuda_block_cache().release(block, bytes);
}

void note_capture_refusal(const std::string& why) {
  if (t_rehearsal != nullptr && t_rehearsal->failure_.empty()) t_rehearsal->failure_ = why;
  if (OpenCapture* c = own_capture()) note_failure(*c, why);
}

}  // namespace mixprec::detail
