// The CUDA-graph capture probe (train/capture_probe.h). The CUDA calls are the core's
// (core/cuda_runtime.h: gpu.cpp is the one file that sees the runtime); the op that was running
// comes from an op watch (runtime/op_watch.h), which asks at every op boundary whether the
// capture is still valid, so even a failure the library swallows (a cuDNN call that fails and
// falls back to our kernels) is placed between two ops.
#include "mixprec/train/capture_probe.h"

#include <chrono>
#include <cstdio>
#include <exception>

#include "core/cuda_runtime.h"
#include "mixprec/core/device.h"
#include "mixprec/core/error.h"
#include "mixprec/core/gpu.h"
#include "mixprec/core/transfer.h"
#include "runtime/op_watch.h"

namespace mixprec::train {
namespace {

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

std::string capture_probe_refusal() {
  const GpuInventory& inv = gpu_inventory();
  if (!inv.built_with_cuda) {
    return "--cuda-capture-probe captures a training step as a CUDA graph, but " + inv.why_none;
  }
  const Device device = current_device();
  if (device.type != DeviceType::cuda) {
    return "--cuda-capture-probe captures a training step as a CUDA graph on a GPU: add --device "
           "cuda (this run is on " + to_string(device) + ")";
  }
  return "";
}

CaptureProbeResult probe_cuda_capture(const std::string& what, const std::function<void()>& work) {
  const std::string refusal = capture_probe_refusal();
  MIXPREC_CHECK(refusal.empty(), ValueError, "capture probe", refusal);
  // The work before (warm-up steps) finishes, and raises its errors, outside the capture.
  synchronize(current_device());
  CaptureProbeResult r;
  std::string thrown;
  std::string thrown_in, first_unhealthy;
  mixprec::detail::CaptureEnd end;
  const auto start = std::chrono::steady_clock::now();
  {
    runtime::detail::OpWatch watch(
        [] { return mixprec::detail::cuda_capture_status() != mixprec::detail::CaptureStatus::invalidated; });
    mixprec::detail::cuda_capture_begin();
    try {
      work();
    } catch (const std::exception& e) {
      thrown = e.what();
    } catch (...) {
      thrown = "an exception that is not a std::exception";
    }
    end = mixprec::detail::cuda_capture_end();  // always: a broken capture must be ended too
    thrown_in = watch.thrown_in();
    first_unhealthy = watch.first_unhealthy();
  }
  r.capture_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  r.captured = end.captured && thrown.empty();
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", r.capture_ms);
  if (r.captured) {
    r.line = "cuda capture probe: " + what + ": captured, " + std::to_string(end.nodes) +
             " graph nodes, capture " + ms + " ms (the loss read left out: a graphed step reads it "
             "after the replay)";
    return r;
  }
  r.failure = !end.first_failure.empty() ? end.first_failure
              : !thrown.empty()          ? one_line(thrown)
                                         : end.error;
  r.op = !thrown_in.empty()       ? thrown_in
         : !first_unhealthy.empty() ? first_unhealthy
                                    : "no op open (the step's own code, outside every op)";
  r.line = "cuda capture probe: " + what + ": NOT capturable: first failure " + r.failure +
           "; in op: " + r.op + "; capture ended: " + (end.error.empty() ? "with a graph" : end.error) +
           (thrown.empty() || r.failure == one_line(thrown) ? "" : "; then threw: " + one_line(thrown)) +
           " (after " + ms + " ms)";
  return r;
}

}  // namespace mixprec::train
