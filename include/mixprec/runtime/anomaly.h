#pragma once
/// Anomaly mode: stops at the first non-finite value a differentiable op produces, in forward or
/// in backward, with an error that names the op, the module path (e.g. "features.3"), the
/// dtype, the training step and statistics of the op's inputs, so the origin of a NaN is found
/// in one run instead of by bisection.
///
///   runtime::DetectAnomaly anomaly;            // this thread, until the guard goes away
///   loss = cross_entropy(model(x), y);           // AnomalyError if an op's output is NaN/Inf
///   scaler.scale(loss).backward();               // ... or an op's input gradient is
///
/// Forward: every op that records a node checks its output. Backward: every node's input
/// gradients are checked; during a backward from a loss multiplied by a GradScaler (scale != 1)
/// only NaN is reported, because an Inf there is an overflow the scaler handles by skipping the
/// step. Off (the default), it costs one thread-local flag test per op.
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::nn {
class Module;
}

namespace mixprec::runtime {

/// The first non-finite value found by anomaly mode; what() says where it came from.
class AnomalyError : public Error {
 public:
  using Error::Error;
};

/// Turns anomaly mode on (or off) for this thread while it lives; nests.
class DetectAnomaly {
 public:
  explicit DetectAnomaly(bool enabled = true);
  ~DetectAnomaly();
  DetectAnomaly(const DetectAnomaly&) = delete;
  DetectAnomaly& operator=(const DetectAnomaly&) = delete;

 private:
  bool previous_;
};

/// True while anomaly mode is on for this thread.
bool anomaly_enabled() noexcept;
/// The training step named in anomaly errors (the Trainer sets it before each step); -1 = unknown.
void set_anomaly_step(std::int64_t step) noexcept;

/// "[128, 10] bf16: min -3.1 max 4.2 mean|x| 0.9, 2 NaN, 0 Inf" — statistics of a tensor in a
/// line, for error messages.
std::string describe_values(const Tensor& t);

namespace anomaly_detail {
/// How a module is named in anomaly errors, e.g. "'features.3' (Conv2d)": nn passes its own
/// (anomaly mode sits below nn and cannot ask a Module for its path).
using ModuleDescriber = std::string (*)(const nn::Module& module);

/// Marks `module` as the innermost module running on this thread (nn::Module::operator()),
/// named by `describe` if an anomaly is reported while it runs.
class ModuleScope {
 public:
  ModuleScope(const nn::Module& module, ModuleDescriber describe);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;
};
/// "features.3 (Conv2d)" for the innermost running module, or "" outside any module.
std::string current_module();
/// Throws AnomalyError if `output` of op `op` has a NaN/Inf (called when anomaly mode is on).
void check_forward(const char* op, const Tensor& output, const std::vector<const Tensor*>& inputs,
                   const std::string& module);
/// Throws AnomalyError if an input gradient returned by a node's backward is non-finite (NaN
/// only when loss_scale != 1).
void check_backward(const char* op, const std::string& module, const Tensor& grad_output,
                    const std::vector<Tensor>& input_grads, double loss_scale);
}  // namespace anomaly_detail

}  // namespace mixprec::runtime
