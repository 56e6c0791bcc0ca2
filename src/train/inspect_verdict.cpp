// The judgements of `mixprec inspect`: the per-layer verdict rule, the reference loss scale,
// GEMM alignment warnings and the bytes-per-parameter memory model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "mixprec/core/error.h"
#include "mixprec/train/inspect.h"
#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/layers.h"

namespace mixprec::train {

using numerics::TensorStats;
namespace {

using numerics::Format;

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%%", 100 * f);
  return buf;
}

// The worst of several named streams by some fraction.
struct Worst {
  double value = 0;
  const char* what = "";
};
using Streams = std::vector<std::pair<const char*, const TensorStats*>>;
Worst worst(const Streams& streams, const std::function<double(const TensorStats&)>& fraction) {
  Worst w;
  for (const auto& [what, s] : streams) {
    const double v = fraction(*s);
    if (v > w.value || w.what[0] == '\0') w = {v, what};
  }
  return w;
}

void check_dimension(std::vector<AlignmentWarning>& out, const std::string& layer,
                     const std::string& type, const char* dimension, std::int64_t size, bool bf16) {
  const bool off8 = size % 8 != 0;
  const bool off16 = bf16 && size % 16 != 0;
  if (!off8 && !off16) return;
  const int multiple = off8 ? 8 : 16;
  const std::int64_t padded = (size + multiple - 1) / multiple * multiple;
  char buf[400];
  const std::string who = layer.empty() ? std::string("the batch") : layer + " (" + type + ")";
  if (off8) {
    std::snprintf(buf, sizeof buf,
                  "%s: %s = %lld is not a multiple of 8: 16-bit GEMM kernels pad it to %lld (%.0f%% "
                  "of that work wasted); use %lld if the model allows",
                  who.c_str(), dimension, static_cast<long long>(size), static_cast<long long>(padded),
                  100.0 * static_cast<double>(padded - size) / static_cast<double>(padded),
                  static_cast<long long>(padded));
  } else {
    std::snprintf(buf, sizeof buf,
                  "%s: %s = %lld is a multiple of 8 but not of 16: bf16 AVX-512 kernels work in "
                  "blocks of 16 (one 512-bit register of f32 accumulators); %lld fills them",
                  who.c_str(), dimension, static_cast<long long>(size), static_cast<long long>(padded));
  }
  out.push_back({layer, dimension, size, multiple, buf});
}

void walk_alignment(const nn::Module& m, const std::string& path, bool bf16,
                    std::vector<AlignmentWarning>& out) {
  if (const auto* linear = dynamic_cast<const nn::Linear*>(&m)) {
    check_dimension(out, path, m.type_name(), "in_features", linear->in_features(), bf16);
    check_dimension(out, path, m.type_name(), "out_features", linear->out_features(), bf16);
  } else if (const auto* conv = dynamic_cast<const nn::Conv2d*>(&m)) {
    check_dimension(out, path, m.type_name(), "in_channels", conv->in_channels(), bf16);
    check_dimension(out, path, m.type_name(), "out_channels", conv->out_channels(), bf16);
  }
  for (const auto& [name, child] : m.children()) {
    walk_alignment(*child, nn::join_path(path, name), bf16, out);
  }
}

}  // namespace

const char* name(Verdict verdict) {
  switch (verdict) {
    case Verdict::safe_fp16: return "safe in fp16";
    case Verdict::needs_loss_scaling: return "needs loss scaling";
    case Verdict::bf16_fine: return "bf16 fine";
    case Verdict::keep_fp32: return "keep in fp32";
  }
  return "?";
}

int reference_scale_log2(double grad_amax) {
  if (!(grad_amax > 0) || !std::isfinite(grad_amax)) return 0;
  const double fp16_max = numerics::format_info(Format::fp16).max;
  int k = static_cast<int>(std::floor(std::log2(fp16_max / grad_amax)));
  k = std::clamp(k, -64, 64);
  // log2 rounds; settle the edge exactly.
  while (k > -64 && std::ldexp(grad_amax, k) > fp16_max) --k;
  while (k < 64 && std::ldexp(grad_amax, k + 1) <= fp16_max) ++k;
  return k;
}

// The verdict rule (docs/diagnostics.md, "The verdict rule"). "Values" are the layer's
// activations and its unscaled gradients (of the output and of the parameters); fractions are
// over all values of a stream, and each test takes the worst stream. First match wins:
//  1. keep in fp32   if values overflow bf16 (> 3.39e38: every 16-bit format), fraction > overflow;
//  2. keep in fp32   if values flush to zero even in bf16, fraction > underflow;
//  fp16 does not hold the layer if (a) values overflow fp16, fraction > overflow, or
//  (b) activations flush to zero in fp16, fraction > underflow (no loss scale reaches them), or
//  (c) gradients flush to zero in fp16 both unscaled and at the reference loss scale 2^k,
//      fraction > underflow;
//  3. keep in fp32   if fp16 does not hold the layer and bf16 weights would lose more than
//                    lost_updates of the updates;
//  4. bf16 fine      if fp16 does not hold the layer;
//  5. needs loss scaling  if gradients flush to zero in fp16 unscaled, fraction > underflow
//                    (by (c) they fit at 2^k);
//  6. safe in fp16   otherwise.
VerdictResult decide_verdict(const LayerReport& l, int k, const VerdictThresholds& t) {
  const Streams values{{"activations", &l.activation},
                       {"output gradients", &l.output_grad},
                       {"parameter gradients", &l.weight_grad}};
  const Streams grads{{"output gradients", &l.output_grad}, {"parameter gradients", &l.weight_grad}};
  const Worst ovf_bf16 = worst(values, [](const TensorStats& s) { return s.overflow_fraction(Format::bf16); });
  const Worst unf_bf16 = worst(values, [](const TensorStats& s) { return s.underflow_fraction(Format::bf16); });
  const Worst ovf_fp16 = worst(values, [](const TensorStats& s) { return s.overflow_fraction(Format::fp16); });
  const double act_unf_fp16 = l.activation.underflow_fraction(Format::fp16);
  const Worst grad_unf = worst(grads, [](const TensorStats& s) { return s.underflow_fraction(Format::fp16); });
  const Worst grad_unf_scaled =
      worst(grads, [k](const TensorStats& s) { return s.underflow_fraction_at_scale(Format::fp16, k); });
  const double lost_bf16 = l.lost_updates.bf16_fraction();
  const std::string scale = "2^" + std::to_string(k);

  if (ovf_bf16.value > t.overflow) {
    return {Verdict::keep_fp32, percent(ovf_bf16.value) + " of " + ovf_bf16.what +
                                    " overflow even bf16: no 16-bit format holds them"};
  }
  if (unf_bf16.value > t.underflow) {
    return {Verdict::keep_fp32, percent(unf_bf16.value) + " of " + unf_bf16.what +
                                    " flush to zero even in bf16"};
  }
  std::string fp16_fails;
  if (ovf_fp16.value > t.overflow) {
    fp16_fails = percent(ovf_fp16.value) + " of " + ovf_fp16.what + " overflow fp16";
  } else if (act_unf_fp16 > t.underflow) {
    fp16_fails = percent(act_unf_fp16) + " of activations flush to zero in fp16 (a loss scale "
                                         "does not reach activations)";
  } else if (grad_unf.value > t.underflow && grad_unf_scaled.value > t.underflow) {
    fp16_fails = percent(grad_unf_scaled.value) + " of " + grad_unf_scaled.what +
                 " flush to zero in fp16 even at loss scale " + scale;
  }
  if (!fp16_fails.empty()) {
    if (lost_bf16 > t.lost_updates) {
      return {Verdict::keep_fp32, fp16_fails + ", and bf16 weights would lose " +
                                      percent(lost_bf16) + " of the updates"};
    }
    return {Verdict::bf16_fine, fp16_fails + "; bf16's range holds them (bf16 weights lose " +
                                    percent(lost_bf16) + " of the updates)"};
  }
  if (grad_unf.value > t.underflow) {
    return {Verdict::needs_loss_scaling,
            percent(grad_unf.value) + " of " + grad_unf.what + " flush to zero in fp16 unscaled, " +
                percent(grad_unf_scaled.value) + " at loss scale " + scale};
  }
  return {Verdict::safe_fp16, "fits fp16 unscaled: nothing overflows; " + percent(grad_unf.value) +
                                  " of " + grad_unf.what + " and " + percent(act_unf_fp16) +
                                  " of activations flush to zero (tolerance " +
                                  percent(t.underflow) + ")"};
}

std::vector<AlignmentWarning> alignment_warnings(const nn::Module& model, std::int64_t batch,
                                                 bool bf16) {
  std::vector<AlignmentWarning> out;
  walk_alignment(model, model.path(), bf16, out);
  check_dimension(out, "", "", "batch", batch, bf16);
  return out;
}

std::vector<MemoryModelRow> memory_model() {
  return {
      {"fp32", 16, 0, "4 weight + 4 grad + 8 Adam m,v (all f32)"},
      {"bf16 / fp16 (fp32 master)", 16, 2,
       "4 f32 weight (the master) + 4 f32 grad + 8 Adam; the 2 B 16-bit copy autocast makes "
       "lives from the forward to the backward"},
      {"pure-bf16", 16, 0, "2 bf16 weight + 2 bf16 grad + 4 f32 master + 8 Adam"},
      {"pure-bf16-sr", 12, 0, "2 bf16 weight + 2 bf16 grad + 8 Adam (no master: stochastic rounding)"},
  };
}

}  // namespace mixprec::train
