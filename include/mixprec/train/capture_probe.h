#pragma once
/// The CUDA-graph capture probe: a diagnostic that learns, on a GPU, what stops a piece of
/// training work (one step's forward and backward: StepBenchmark::capture_probe, `mixprec bench
/// --cuda-capture-probe`) from being captured as a CUDA graph. It captures the work on the
/// backend's stream in global mode (cudaStreamBeginCapture ... cudaStreamEndCapture, so any
/// synchronising or allocating call, on any thread, breaks it), never instantiates or replays
/// the graph, and says in one line either how many nodes the graph has and how long capturing
/// took, or the first call that failed, its CUDA error and the op running then. The captured work
/// does not run: whatever it was to compute (gradients, losses) is left unwritten.
#include <cstddef>
#include <functional>
#include <string>

namespace mixprec::train {

/// What one capture found.
struct CaptureProbeResult {
  bool captured = false;   ///< the capture ended with a graph
  std::size_t nodes = 0;   ///< its node count (cudaGraphGetNodes)
  double capture_ms = 0;   ///< wall time from cudaStreamBeginCapture to cudaStreamEndCapture
  /// Empty when captured; else the first failing call and its CUDA error name (the runtime
  /// call's name and error, or the exception the work threw, which names both).
  std::string failure;
  /// Empty when captured; else the ops open when it failed (outermost first, e.g.
  /// "LinearBackward > cast"), or the two op boundaries the capture first broke between.
  std::string op;
  std::string line;        ///< the whole verdict in one line, "cuda capture probe: ..."
};

/// Why the probe cannot run in this process ("" when it can): a build without CUDA, or a
/// current device that is not cuda.
std::string capture_probe_refusal();

/// Captures work() (described by `what`, e.g. "gpt-mini bf16 forward+backward") as above; the
/// stream is synchronised first and left with no capture open and no error pending, whatever
/// work() did (a throw inside it is caught and reported). ValueError naming the reason when
/// capture_probe_refusal() is not empty.
CaptureProbeResult probe_cuda_capture(const std::string& what, const std::function<void()>& work);

}  // namespace mixprec::train
