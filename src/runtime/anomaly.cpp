#include "mixprec/runtime/anomaly.h"

#include <cmath>
#include <cstdio>

#include "kernels/reduce.h"
#include "mixprec/core/transfer.h"
#include "mixprec/runtime/node.h"
#include "runtime/op_scope.h"

namespace mixprec::runtime {
namespace {

thread_local bool tls_anomaly = false;
thread_local std::int64_t tls_step = -1;
// The running modules, innermost last, each with how nn names it.
struct RunningModule {
  const nn::Module* module;
  anomaly_detail::ModuleDescriber describe;
};
thread_local std::vector<RunningModule> tls_modules;

// max |x| of a non-empty tensor as a 0-d tensor: what ops' max_abs computes (ops/reduce.h: the
// same kernel, the same profiler row), called on the kernel here because anomaly mode sits
// below the ops.
Tensor max_abs_of(const Tensor& x) {
  runtime::detail::OpScope prof(runtime::detail::ScopeKind::op, "max_abs");
  require_compute_dtype("max_abs", x.dtype());
  const Tensor c = x.contiguous();
  Tensor out = Tensor::empty({}, x.dtype());
  kernels::reduce(kernels::ReduceOp::amax, c.data_ptr(), c.dtype(), 1, x.numel(), 1,
                  out.data_ptr(), out.dtype());
  prof.done(out, {&x}, static_cast<double>(x.numel()));
  return out;
}

// True if t holds a NaN or an Inf (max |x| propagates NaN).
bool has_non_finite(const Tensor& t, bool nan_only) {
  if (t.numel() == 0) return false;
  NoGradGuard no_grad;
  // fp8 has no kernels: widen it (exactly) to look for NaN/Inf.
  const TransferReason why("anomaly check (--detect-anomaly)");
  const float m = max_abs_of(is_storage_only(t.dtype()) ? t.to(DType::f32) : t).item();
  return nan_only ? std::isnan(m) : !std::isfinite(m);
}

std::string step_text() {
  return tls_step >= 0 ? " at step " + std::to_string(tls_step) : "";
}

std::string module_text(const std::string& module) {
  return module.empty() ? "" : " in module " + module;
}

}  // namespace

DetectAnomaly::DetectAnomaly(bool enabled) : previous_(tls_anomaly) { tls_anomaly = enabled; }
DetectAnomaly::~DetectAnomaly() { tls_anomaly = previous_; }

bool anomaly_enabled() noexcept { return tls_anomaly; }
void set_anomaly_step(std::int64_t step) noexcept { tls_step = step; }

std::string describe_values(const Tensor& t) {
  std::string out = to_string(t.shape()) + " " + name(t.dtype());
  if (t.numel() == 0) return out + ": empty";
  const TransferReason why("anomaly report (--detect-anomaly)");
  const std::vector<float> v = t.to_vector();
  double lo = INFINITY, hi = -INFINITY, abs_sum = 0;
  std::int64_t nans = 0, infs = 0, finite = 0;
  for (float x : v) {
    if (std::isnan(x)) { ++nans; continue; }
    if (std::isinf(x)) { ++infs; continue; }
    lo = std::min(lo, static_cast<double>(x));
    hi = std::max(hi, static_cast<double>(x));
    abs_sum += std::fabs(static_cast<double>(x));
    ++finite;
  }
  char buf[160];
  if (finite > 0) {
    std::snprintf(buf, sizeof buf, ": finite min %.4g max %.4g mean|x| %.4g, %lld NaN, %lld Inf", lo,
                  hi, abs_sum / static_cast<double>(finite), static_cast<long long>(nans),
                  static_cast<long long>(infs));
  } else {
    std::snprintf(buf, sizeof buf, ": no finite value, %lld NaN, %lld Inf",
                  static_cast<long long>(nans), static_cast<long long>(infs));
  }
  return out + buf;
}

namespace anomaly_detail {

ModuleScope::ModuleScope(const nn::Module& module, ModuleDescriber describe) {
  tls_modules.push_back({&module, describe});
}
ModuleScope::~ModuleScope() { tls_modules.pop_back(); }

std::string current_module() {
  if (tls_modules.empty()) return "";
  const RunningModule& m = tls_modules.back();
  return m.describe(*m.module);
}

void check_forward(const char* op, const Tensor& output, const std::vector<const Tensor*>& inputs,
                   const std::string& module) {
  if (!has_non_finite(output, /*nan_only=*/false)) return;
  std::string msg = "forward of op '" + std::string(op) + "'" + module_text(module) +
                    " produced a non-finite output" + step_text() + ": output " +
                    describe_values(output);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] != nullptr && inputs[i]->defined()) {
      msg += "; input #" + std::to_string(i) + " " + describe_values(*inputs[i]);
    }
  }
  throw AnomalyError("anomaly", msg);
}

void check_backward(const char* op, const std::string& module, const Tensor& grad_output,
                    const std::vector<Tensor>& input_grads, double loss_scale) {
  const bool nan_only = loss_scale != 1.0;
  for (std::size_t i = 0; i < input_grads.size(); ++i) {
    const Tensor& g = input_grads[i];
    if (!g.defined() || !has_non_finite(g, nan_only)) continue;
    std::string msg = "backward of op '" + std::string(op) + "'" +
                      (module.empty() ? "" : " (forward in module " + module + ")") +
                      " produced a non-finite gradient for input #" + std::to_string(i) +
                      step_text() + ": gradient " + describe_values(g) + "; incoming gradient " +
                      describe_values(grad_output);
    if (nan_only) msg += "; loss scale " + std::to_string(loss_scale);
    throw AnomalyError("anomaly", msg);
  }
}

}  // namespace anomaly_detail
}  // namespace mixprec::runtime
