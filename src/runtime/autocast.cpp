#include "mixprec/runtime/autocast.h"

#include <unordered_map>

#include "mixprec/runtime/node.h"
#include "runtime/cast_node.h"
#include "runtime/weight_copies.h"

namespace mixprec::runtime {
namespace {

/// x cast to copy.dtype() once more without converting: copy (detached, made from x at its
/// current version) is shared, with a fresh cast node linking it to x for the backward pass.
/// How autocast reuses a weight's 16-bit copy across steps.
Tensor reuse_cast(const Tensor& x, const Tensor& copy) {
  Tensor y = copy.detach();
  if (runtime::needs_grad({&x})) {
    runtime::attach(y, std::make_shared<runtime::CastNode>(x.dtype()), {&x});
  }
  return y;
}

struct CachedCast {
  std::weak_ptr<mixprec::detail::TensorImpl> source;  // detects reuse of a freed address
  std::uint64_t version = 0;
  DType dtype = DType::f32;
  Tensor value;
};

struct State {
  bool enabled = false;
  DType dtype = DType::bf16;
  int depth = 0;  // nesting of Autocast objects, enabled or not
  std::unordered_map<const mixprec::detail::TensorImpl*, CachedCast> cache;
  CastStats stats;
};

thread_local State tls;

// Parameters (fp32 leaves that require grad) are cast once per region; activations are cast
// every time (they are new tensors each step anyway).
Tensor cast_for_autocast(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  const bool cacheable = t.is_leaf() && t.requires_grad();
  if (cacheable) {
    auto it = tls.cache.find(t.impl_ptr().get());
    if (it != tls.cache.end()) {
      const CachedCast& c = it->second;
      // A cast made under NoGradGuard has no node: serving it while grad mode is on would cut
      // the parameter off from its gradient (a checkpointed forward runs without grad, then
      // its recomputation, possibly in the same region, with grad). Cast afresh instead.
      const bool linked = !runtime::grad_enabled() || c.value.requires_grad();
      if (c.dtype == to && c.version == t.version() && c.source.lock() == t.impl_ptr() && linked) {
        ++tls.stats.cache_hits;
        return c.value;
      }
    }
  }
  // A copy kept from the previous step (written by the optimizer, or cast then and unchanged),
  // in the store lent to this thread (the TrainStep's) or the process default.
  // The kept copy is stored detached (it must not hold the graph, or the parameter, alive);
  // each use links it to the parameter with a fresh cast node.
  Tensor out;
  if (const Tensor kept = cacheable ? detail::current_weight_copy(t, to) : Tensor(); kept.defined()) {
    ++tls.stats.cache_hits;
    out = reuse_cast(t, kept);
  } else {
    ++tls.stats.casts;
    out = t.to(to);  // the cast op (Tensor::to is cast())
    if (cacheable) detail::publish_weight_copy(t, out.detach());
  }
  if (cacheable) tls.cache[t.impl_ptr().get()] = CachedCast{t.impl_ptr(), t.version(), to, out};
  return out;
}

}  // namespace

Autocast::Autocast(bool enabled, DType lower) : prev_enabled_(tls.enabled), prev_dtype_(tls.dtype) {
  MIXPREC_CHECK(lower == DType::bf16 || lower == DType::f16, DTypeError, "Autocast",
                "the lower-precision dtype must be bf16 or f16, got " << name(lower));
  tls.enabled = enabled;
  tls.dtype = lower;
  ++tls.depth;
}

Autocast::~Autocast() {
  tls.enabled = prev_enabled_;
  tls.dtype = prev_dtype_;
  if (--tls.depth == 0) tls.cache.clear();  // the cache lives as long as the outermost region
}

bool autocast_enabled() noexcept { return tls.enabled; }
DType autocast_dtype() noexcept { return tls.dtype; }
CastStats cast_stats() noexcept { return tls.stats; }
void reset_cast_stats() noexcept { tls.stats = {}; }

std::vector<Tensor> autocast_inputs(OpKind op, std::initializer_list<const Tensor*> inputs) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor* t : inputs) out.push_back(t != nullptr ? *t : Tensor());
  return autocast_inputs(op, out);
}

std::vector<Tensor> autocast_inputs(OpKind op, const std::vector<Tensor>& inputs) {
  // Every op frontend passes its inputs through here, so this is where fp8 (storage-only)
  // inputs are refused, before a region could silently widen them. matmul and linear handle
  // fp8 themselves before they get here.
  for (const Tensor& t : inputs) {
    if (t.defined()) require_compute_dtype(name(op), t.dtype());
  }
  std::vector<Tensor> out = inputs;
  if (!tls.enabled) return out;
  switch (policy_row(op).policy) {
    case CastPolicy::lower_precision:
      for (Tensor& t : out) {
        if (t.defined()) t = cast_for_autocast(t, tls.dtype);
      }
      break;
    case CastPolicy::fp32:
      for (Tensor& t : out) {
        if (t.defined()) t = cast_for_autocast(t, DType::f32);
      }
      break;
    case CastPolicy::promote: {
      // Widest input dtype: f32 if any input is f32 or if bf16 meets f16.
      DType widest = DType::f32;
      bool first = true;
      for (const Tensor& t : out) {
        if (!t.defined()) continue;
        widest = first ? t.dtype() : (widest == t.dtype() ? widest : DType::f32);
        first = false;
      }
      for (Tensor& t : out) {
        if (t.defined()) t = cast_for_autocast(t, widest);
      }
      break;
    }
    case CastPolicy::fp32_to_lower:  // the op widens as it loads and stores the region's dtype
    case CastPolicy::pass_through:
      break;
  }
  return out;
}

Tensor run_with_inputs_cast(DType dtype, const std::vector<Tensor>& inputs,
                            const std::function<Tensor(const std::vector<Tensor>&)>& fn) {
  std::vector<Tensor> cast_inputs;
  cast_inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    cast_inputs.push_back(t.defined() && tls.enabled ? cast_for_autocast(t, dtype) : t);
  }
  Autocast off(false, tls.dtype);
  return fn(cast_inputs);
}

}  // namespace mixprec::runtime
